//! proptest strategies (feature `proptest`): protocol parameters, and whole protocols generated
//! as programs (a structure of statements, rendered to `.phase` text and sent through the real
//! front end), for users' property suites and phasecheck's own differential tests.
//!
//! ```
//! use phasecheck_model::strategies::{protocol, GenConfig};
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//!
//! let mut runner = TestRunner::deterministic();
//! let p = protocol(GenConfig::default()).new_tree(&mut runner).unwrap().current();
//! let loaded = p.build().expect("generated protocols are well formed");
//! assert!(loaded.proto.threads.len() <= 3);
//! ```

use crate::api::{Loaded, SpecBuilder};
use proptest::prelude::*;

/// Parameters of the usual multi-stage pipeline: stages, iterations, consumer threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineParams {
    pub stages: i64,
    pub iters: i64,
    pub consumers: u32,
}

/// STAGES in 1..=max_stages, ITERS in 1..=max_iters, consumers in 1..=max_consumers.
pub fn pipeline_params(max_stages: i64, max_iters: i64, max_consumers: u32) -> impl Strategy<Value = PipelineParams> {
    (1..=max_stages, 1..=max_iters, 1..=max_consumers).prop_map(|(stages, iters, consumers)| PipelineParams { stages, iters, consumers })
}

/// One generated statement. Barriers are `b0`, `b1`; buffers `d0`, `d1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GenStmt {
    /// `arrive(b)` (its token parity is recorded in outcomes).
    Arrive(usize),
    /// `let t = arrive(b); wait(b, t)`.
    ArriveThenWait(usize),
    ArriveAndWait(usize),
    /// `arrive_and_drop(b)`.
    Drop(usize),
    /// `wait_parity(b, p)`; inside a loop `p` may be the loop's `i % 2` (`None`).
    WaitParity(usize, Option<i64>),
    TryWaitParity(usize, Option<i64>),
    /// `arrive_expect_tx(b, bytes)` then `copy_async(d, b)` (bytes may under-count the buffer).
    ArriveExpectTxCopy {
        bar: usize,
        buf: usize,
        bytes: i64,
    },
    /// `memcpy_async(d, b)` (copy first, then expect_tx: a transient negative tx-count).
    MemcpyAsync {
        bar: usize,
        buf: usize,
    },
    ExpectTx(usize, i64),
    CompleteTx(usize, i64),
    Write(usize, i64),
    Read(usize),
    Work,
    SyncThreads,
    /// `for i in 0..n { body }` (one level).
    Loop(i64, Vec<GenStmt>),
    // The async proxy.
    /// `copy_store_async(d)` then `commit_group()`: a TMA store of the buffer in a group of its own.
    StoreAsync(usize),
    /// `wait_group_read(n)`.
    WaitGroupRead(i64),
    /// `wgmma_async(d)`.
    Wgmma(usize),
    /// `wgmma_wait(n)`.
    WgmmaWait(i64),
    /// `fence_proxy_async()`.
    FenceProxyAsync,
}

/// A generated protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenProtocol {
    /// Per barrier: its count, and whether it has the completion function `bump` (adds 1 to `ctrl`).
    pub barriers: Vec<(i64, bool)>,
    /// Per buffer: its bytes.
    pub buffers: Vec<i64>,
    /// Per role: thread count and body.
    pub roles: Vec<(u32, Vec<GenStmt>)>,
}

/// What the generator may use.
#[derive(Clone, Copy, Debug)]
pub struct GenConfig {
    /// `syncthreads` statements (the runtime's trace replay does not follow them).
    pub syncthreads: bool,
    /// Statements per role body (top level), at most.
    pub max_stmts: usize,
    /// Async-proxy statements: TMA stores, bulk and wgmma waits, proxy fences.
    pub async_proxy: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            syncthreads: true,
            max_stmts: 4,
            async_proxy: true,
        }
    }
}

/// Renders one statement; `fresh` numbers the locals it declares (each `let` names a new one).
fn stmt_text(s: &GenStmt, in_loop: bool, fresh: &mut usize, out: &mut Vec<String>) {
    let par = |p: &Option<i64>| match p {
        Some(v) => v.to_string(),
        None if in_loop => "i % 2".to_string(),
        None => "0".to_string(),
    };
    match s {
        GenStmt::Arrive(b) => out.push(format!("arrive(b{b})")),
        GenStmt::ArriveThenWait(b) => {
            *fresh += 1;
            out.push(format!("let t{fresh} = arrive(b{b})"));
            out.push(format!("wait(b{b}, t{fresh})"));
        }
        GenStmt::ArriveAndWait(b) => out.push(format!("arrive_and_wait(b{b})")),
        GenStmt::Drop(b) => out.push(format!("arrive_and_drop(b{b})")),
        GenStmt::WaitParity(b, p) => out.push(format!("wait_parity(b{b}, {})", par(p))),
        GenStmt::TryWaitParity(b, p) => {
            *fresh += 1;
            out.push(format!("let ok{fresh} = try_wait_parity(b{b}, {})", par(p)));
        }
        GenStmt::ArriveExpectTxCopy { bar, buf, bytes } => {
            out.push(format!("arrive_expect_tx(b{bar}, {bytes})"));
            out.push(format!("copy_async(d{buf}, b{bar})"));
        }
        GenStmt::MemcpyAsync { bar, buf } => out.push(format!("memcpy_async(d{buf}, b{bar})")),
        GenStmt::ExpectTx(b, n) => out.push(format!("expect_tx(b{b}, {n})")),
        GenStmt::CompleteTx(b, n) => out.push(format!("complete_tx(b{b}, {n})")),
        GenStmt::Write(d, v) => out.push(format!("write(d{d}, {v})")),
        GenStmt::Read(d) => out.push(format!("read(d{d})")),
        GenStmt::Work => out.push("work".to_string()),
        GenStmt::SyncThreads => out.push("syncthreads".to_string()),
        GenStmt::Loop(n, body) => {
            out.push(format!("for i in 0..{n} {{"));
            for s in body {
                stmt_text(s, true, fresh, out);
            }
            out.push("}".to_string());
        }
        GenStmt::StoreAsync(d) => {
            out.push(format!("copy_store_async(d{d})"));
            out.push("commit_group()".to_string());
        }
        GenStmt::WaitGroupRead(n) => out.push(format!("wait_group_read({n})")),
        GenStmt::Wgmma(d) => out.push(format!("wgmma_async(d{d})")),
        GenStmt::WgmmaWait(n) => out.push(format!("wgmma_wait({n})")),
        GenStmt::FenceProxyAsync => out.push("fence_proxy_async()".to_string()),
    }
}

impl GenProtocol {
    /// The builder that writes this protocol.
    pub fn builder(&self) -> SpecBuilder {
        let mut b = SpecBuilder::new("generated").var("ctrl", 0);
        for (i, (count, completion)) in self.barriers.iter().enumerate() {
            let c = if *completion { " completion bump" } else { "" };
            b = b.barrier(&format!("b{i} count {count}{c}"));
        }
        if self.barriers.iter().any(|(_, c)| *c) {
            b = b.completion("bump", "ctrl = ctrl + 1");
        }
        for (i, bytes) in self.buffers.iter().enumerate() {
            b = b.buffer(&format!("d{i} bytes {bytes}"));
        }
        for (r, (count, body)) in self.roles.iter().enumerate() {
            let mut lines = Vec::new();
            let mut fresh = 0;
            for s in body {
                stmt_text(s, false, &mut fresh, &mut lines);
            }
            if lines.is_empty() {
                lines.push("work".into());
            }
            b = b.role(&format!("r{r}"), *count, &lines.join("\n"));
        }
        b
    }

    pub fn source(&self) -> String {
        self.builder().source()
    }

    pub fn build(&self) -> Result<Loaded, String> {
        self.builder().build()
    }

    /// Does any statement (at any depth) satisfy `f`?
    pub fn any_stmt(&self, f: &dyn Fn(&GenStmt) -> bool) -> bool {
        fn walk(s: &[GenStmt], f: &dyn Fn(&GenStmt) -> bool) -> bool {
            s.iter().any(|x| f(x) || matches!(x, GenStmt::Loop(_, b) if walk(b, f)))
        }
        self.roles.iter().any(|(_, b)| walk(b, f))
    }
}

fn simple_stmt(nbar: usize, nbuf: usize, sync: bool, async_proxy: bool) -> BoxedStrategy<GenStmt> {
    let bar = 0..nbar;
    let buf = 0..nbuf;
    let par = prop_oneof![Just(None), (0i64..2).prop_map(Some)];
    let mut options: Vec<(u32, BoxedStrategy<GenStmt>)> = vec![
        (4, bar.clone().prop_map(GenStmt::Arrive).boxed()),
        (3, bar.clone().prop_map(GenStmt::ArriveThenWait).boxed()),
        (2, bar.clone().prop_map(GenStmt::ArriveAndWait).boxed()),
        (1, bar.clone().prop_map(GenStmt::Drop).boxed()),
        (3, (bar.clone(), par.clone()).prop_map(|(b, p)| GenStmt::WaitParity(b, p)).boxed()),
        (2, (bar.clone(), par).prop_map(|(b, p)| GenStmt::TryWaitParity(b, p)).boxed()),
        (
            2,
            (bar.clone(), buf.clone(), prop_oneof![Just(16i64), Just(32)])
                .prop_map(|(bar, buf, bytes)| GenStmt::ArriveExpectTxCopy { bar, buf, bytes })
                .boxed(),
        ),
        (
            1,
            (bar.clone(), buf.clone())
                .prop_map(|(bar, buf)| GenStmt::MemcpyAsync { bar, buf })
                .boxed(),
        ),
        (1, bar.clone().prop_map(|b| GenStmt::ExpectTx(b, 16)).boxed()),
        (1, bar.prop_map(|b| GenStmt::CompleteTx(b, 16)).boxed()),
        (2, (buf.clone(), 1i64..4).prop_map(|(d, v)| GenStmt::Write(d, v)).boxed()),
        (3, buf.prop_map(GenStmt::Read).boxed()),
        (1, Just(GenStmt::Work).boxed()),
    ];
    if sync {
        options.push((1, Just(GenStmt::SyncThreads).boxed()));
    }
    if async_proxy {
        options.push((1, (0..nbuf).prop_map(GenStmt::StoreAsync).boxed()));
        options.push((1, (0i64..2).prop_map(GenStmt::WaitGroupRead).boxed()));
        options.push((1, (0..nbuf).prop_map(GenStmt::Wgmma).boxed()));
        options.push((1, (0i64..2).prop_map(GenStmt::WgmmaWait).boxed()));
        options.push((1, Just(GenStmt::FenceProxyAsync).boxed()));
    }
    proptest::strategy::Union::new_weighted(options).boxed()
}

/// Whole protocols: 1-2 barriers (count 1-2, maybe a completion function), 1-2 buffers of 16 or
/// 32 bytes, two roles of 1-2 threads (3 at most in all), bodies of a few statements with at most
/// one loop of two rounds. Most are wrong in some way (that is the point: the differential suites
/// compare behaviours, not verdicts); all are well formed.
pub fn protocol(cfg: GenConfig) -> impl Strategy<Value = GenProtocol> {
    (1usize..=2, 1usize..=2, prop_oneof![Just((1u32, 1u32)), Just((1, 2)), Just((2, 1))]).prop_flat_map(move |(nbar, nbuf, (c0, c1))| {
        let stmt = simple_stmt(nbar, nbuf, cfg.syncthreads, cfg.async_proxy);
        let top = prop_oneof![
            6 => stmt.clone(),
            1 => ((1i64..=2), prop::collection::vec(stmt.clone(), 1..=3)).prop_map(|(n, b)| GenStmt::Loop(n, b)),
        ];
        let body = prop::collection::vec(top, 1..=cfg.max_stmts);
        (
            prop::collection::vec((1i64..=2, prop::bool::weighted(0.2)), nbar),
            prop::collection::vec(prop_oneof![Just(16i64), Just(32)], nbuf),
            body.clone(),
            body,
        )
            .prop_map(move |(barriers, buffers, b0, b1)| GenProtocol {
                barriers,
                buffers,
                roles: vec![(c0, b0), (c1, b1)],
            })
    })
}
