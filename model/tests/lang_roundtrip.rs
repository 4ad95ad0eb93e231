//! Laws of the pretty-printer and robustness of the front end, over random syntax trees and
//! random or mutated text.

use phasecheck_model::kind::ViolationKind;
use phasecheck_model::lang::ast::*;
use phasecheck_model::lang::blackwell::TcStmt;
use phasecheck_model::lang::{check, parse, pretty, same_program};
use proptest::prelude::*;

fn e(kind: ExprKind) -> Expr {
    Expr {
        kind,
        span: Span::default(),
    }
}

fn ident(name: String) -> Ident {
    Ident {
        name,
        span: Span::default(),
    }
}

fn st(kind: StmtKind) -> Stmt {
    Stmt {
        kind,
        span: Span::default(),
    }
}

fn block(stmts: Vec<Stmt>) -> Block {
    Block {
        stmts,
        span: Span::default(),
    }
}

fn reserved(s: &str) -> bool {
    phasecheck_model::lang::parser::is_reserved(s)
}

/// Names: a few that look like the contextual words (`version`, `holds`, `counts`) plus random ones.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "a", "i", "s", "STAGES", "tid", "full", "slot", "version", "holds", "counts", "_x1", "expect_"
        ])
        .prop_map(String::from),
        "[a-zA-Z_][a-zA-Z0-9_]{0,7}".prop_filter("not reserved", |s| !reserved(s)),
    ]
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        (0i64..100).prop_map(|v| e(ExprKind::Int(v))),
        (0i64..=i64::MAX).prop_map(|v| e(ExprKind::Int(v))),
        name().prop_map(|n| e(ExprKind::Name(n))),
        name().prop_map(|n| e(ExprKind::RoleCount(n))),
    ];
    leaf.prop_recursive(5, 40, 2, |inner| {
        let binops = prop::sample::select(BinOp::ALL.to_vec());
        prop_oneof![
            (prop::sample::select(vec![UnOp::Neg, UnOp::Not]), inner.clone()).prop_map(|(op, x)| e(ExprKind::Unary(op, Box::new(x)))),
            (binops, inner.clone(), inner).prop_map(|(op, a, b)| e(ExprKind::Binary(op, Box::new(a), Box::new(b)))),
        ]
    })
}

fn place() -> impl Strategy<Value = Place> {
    (name(), prop::option::of(expr())).prop_map(|(n, ix)| Place {
        name: ident(n),
        index: ix.map(Box::new),
        span: Span::default(),
    })
}

/// Every Blackwell statement (lang::blackwell), with and without its named arguments.
fn blackwell() -> impl Strategy<Value = TcStmt> {
    let p = place;
    let x = expr;
    let ox = || prop::option::of(expr());
    prop_oneof![
        (p(), prop::collection::vec(p(), 1..=3), ox(), ox()).prop_map(|(acc, bufs, expect, version)| TcStmt::Mma {
            acc,
            bufs,
            expect,
            version
        }),
        (p(), ox()).prop_map(|(bar, multicast)| TcStmt::Commit { bar, multicast }),
        (p(), x()).prop_map(|(tmem, cols)| TcStmt::Alloc { tmem, cols }),
        p().prop_map(|tmem| TcStmt::Dealloc { tmem }),
        Just(TcStmt::Relinquish),
        (p(), ox()).prop_map(|(tmem, expect)| TcStmt::Ld { tmem, expect }),
        Just(TcStmt::WaitLd),
        (p(), p()).prop_map(|(resp, bar)| TcStmt::ClcTryCancel { resp, bar }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let p = place;
    let x = expr;
    let ox = || prop::option::of(expr());
    let kind = prop_oneof![
        (p(), ox()).prop_map(|(bar, n)| OpKind::Arrive { bar, n }),
        (p(), x()).prop_map(|(bar, bytes)| OpKind::ArriveExpectTx { bar, bytes }),
        (p(), x()).prop_map(|(bar, token)| OpKind::Wait { bar, token }),
        (p(), x()).prop_map(|(bar, parity)| OpKind::WaitParity { bar, parity }),
        (p(), x()).prop_map(|(bar, token)| OpKind::TryWait { bar, token }),
        (p(), x()).prop_map(|(bar, parity)| OpKind::TryWaitParity { bar, parity }),
        p().prop_map(|bar| OpKind::ArriveAndWait { bar }),
        p().prop_map(|bar| OpKind::ArriveAndDrop { bar }),
        (p(), x()).prop_map(|(bar, bytes)| OpKind::ExpectTx { bar, bytes }),
        (p(), x()).prop_map(|(bar, bytes)| OpKind::CompleteTx { bar, bytes }),
        (p(), p(), ox(), ox()).prop_map(|(buf, bar, bytes, version)| OpKind::CopyAsync { buf, bar, bytes, version }),
        (p(), p(), ox(), ox()).prop_map(|(buf, bar, bytes, version)| OpKind::MemcpyAsync { buf, bar, bytes, version }),
        (p(), ox()).prop_map(|(buf, expect)| OpKind::Read { buf, expect }),
        (p(), x()).prop_map(|(buf, version)| OpKind::Write { buf, version }),
        (p(), ox()).prop_map(|(bar, count)| OpKind::Init { bar, count }),
        p().prop_map(|bar| OpKind::Inval { bar }),
        p().prop_map(|bar| OpKind::Commit { bar }),
        Just(OpKind::Elect),
        // Named barriers, cp.async, byte ranges.
        (x(), x()).prop_map(|(id, count)| OpKind::BarSync { id, count }),
        (x(), x()).prop_map(|(id, count)| OpKind::BarArrive { id, count }),
        (p(), ox(), ox(), ox()).prop_map(|(buf, offset, bytes, version)| OpKind::CpAsync {
            buf,
            offset,
            bytes,
            version
        }),
        (p(), any::<bool>()).prop_map(|(bar, noinc)| OpKind::CpAsyncArrive { bar, noinc }),
        (p(), p(), x(), ox(), ox(), any::<bool>()).prop_map(|(buf, bar, offset, bytes, version, libcu)| OpKind::CopyAsyncPart {
            buf,
            bar,
            offset,
            bytes,
            version,
            libcu
        }),
        (p(), x(), ox(), ox()).prop_map(|(buf, offset, bytes, expect)| OpKind::ReadPart {
            buf,
            offset,
            bytes,
            expect
        }),
        // The async proxy.
        p().prop_map(|buf| OpKind::CopyStoreAsync { buf }),
        (p(), x(), ox()).prop_map(|(buf, offset, bytes)| OpKind::CopyStoreAsyncPart { buf, offset, bytes }),
        Just(OpKind::CommitGroup),
        (x(), any::<bool>()).prop_map(|(n, read)| OpKind::WaitGroup { n, read }),
        (prop::collection::vec(p(), 1..=4), ox(), any::<bool>()).prop_map(|(bufs, expect, warpgroup)| OpKind::WgmmaAsync {
            bufs,
            expect,
            warpgroup
        }),
        (x(), any::<bool>()).prop_map(|(n, warpgroup)| OpKind::WgmmaWait { n, warpgroup }),
        Just(OpKind::FenceProxyAsync),
        Just(OpKind::FenceMbarrierInit),
        // TMA descriptors in shared memory: the edit, the fence, and a whole or partial copy
        // through the descriptor.
        (p(), x()).prop_map(|(map, version)| OpKind::TensormapWrite { map, version }),
        // Counters: the atomic add and the checked read.
        (p(), x()).prop_map(|(counter, value)| OpKind::AtomicAdd { counter, value }),
        (p(), ox()).prop_map(|(counter, expect)| OpKind::ReadCounter { counter, expect }),
        p().prop_map(|map| OpKind::FenceProxyTensormap { map }),
        (p(), ox(), p(), p(), prop::option::of(x()), ox(), ox()).prop_map(|(map, expect, buf, bar, offset, bytes, version)| {
            let kind = match offset {
                Some(offset) => OpKind::CopyAsyncPart {
                    buf,
                    bar,
                    offset,
                    bytes,
                    version,
                    libcu: false,
                },
                None => OpKind::CopyAsync { buf, bar, bytes, version },
            };
            OpKind::CopyAsyncTensor {
                map,
                expect,
                op: Box::new(Op {
                    kind,
                    span: Span::default(),
                }),
            }
        }),
        // Blackwell.
        blackwell().prop_map(OpKind::Tc),
        // Cluster scope.
        Just(OpKind::ClusterArriveRelaxed),
        (p(), p(), p(), ox(), ox(), x()).prop_map(|(buf, bar, src, offset, bytes, rank)| OpKind::Remote {
            target: ClusterTarget::Cta(rank),
            op: Box::new(Op {
                kind: OpKind::CopyAsyncFrom {
                    buf,
                    bar,
                    src,
                    offset,
                    bytes
                },
                span: Span::default(),
            }),
        }),
        // An atomic add to a peer's counter, and a read of it.
        (p(), x(), ox(), x(), any::<bool>()).prop_map(|(counter, value, expect, rank, add)| OpKind::Remote {
            target: ClusterTarget::Cta(rank),
            op: Box::new(Op {
                kind: if add {
                    OpKind::AtomicAdd { counter, value }
                } else {
                    OpKind::ReadCounter { counter, expect }
                },
                span: Span::default(),
            }),
        }),
    ];
    kind.prop_map(|kind| Op {
        kind,
        span: Span::default(),
    })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![expr().prop_map(Value::Expr), op().prop_map(Value::Op)]
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let leaf = prop_oneof![
        (name(), value()).prop_map(|(n, value)| st(StmtKind::Let { name: ident(n), value })),
        (name(), value()).prop_map(|(n, value)| st(StmtKind::Assign { name: ident(n), value })),
        op().prop_map(|o| st(StmtKind::Op(o))),
        expr().prop_map(|x| st(StmtKind::Assert(x))),
        Just(st(StmtKind::Return)),
        Just(st(StmtKind::Work)),
        Just(st(StmtKind::SyncWarp)),
        Just(st(StmtKind::SyncThreads)),
        Just(st(StmtKind::Break)),
        expr().prop_map(|m| st(StmtKind::SyncWarpMask(m))),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        let body = || prop::collection::vec(inner.clone(), 0..4).prop_map(block);
        prop_oneof![
            (name(), expr(), expr(), body()).prop_map(|(v, lo, hi, body)| st(StmtKind::For {
                var: ident(v),
                lo,
                hi,
                body
            })),
            (expr(), body(), prop::option::of(body())).prop_map(|(cond, then, els)| st(StmtKind::If { cond, then, els })),
            (expr(), body()).prop_map(|(cond, body)| st(StmtKind::While { cond, body })),
            // `else if` chains.
            (expr(), body(), expr(), body(), prop::option::of(body())).prop_map(|(c1, t1, c2, t2, els)| {
                let inner_if = st(StmtKind::If { cond: c2, then: t2, els });
                st(StmtKind::If {
                    cond: c1,
                    then: t1,
                    els: Some(block(vec![inner_if])),
                })
            }),
        ]
    })
}

fn body() -> impl Strategy<Value = Block> {
    prop::collection::vec(stmt(), 0..5).prop_map(block)
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        (name(), expr()).prop_map(|(n, value)| Item::Param(ParamDecl { name: ident(n), value })),
        expr().prop_map(Item::WarpSize),
        (name(), prop::option::of(expr()), expr(), prop::option::of(name()), any::<bool>()).prop_map(|(n, len, count, c, manual_init)| {
            Item::Barrier(BarrierDecl {
                name: ident(n),
                len,
                count,
                completion: c.map(ident),
                manual_init,
                span: Span::default(),
            })
        }),
        (name(), prop::option::of(expr()), expr()).prop_map(|(n, len, bytes)| Item::Buffer(BufferDecl {
            name: ident(n),
            len,
            bytes,
            tensormap: false,
            counter: false,
            span: Span::default()
        })),
        // A descriptor is always 128 bytes: the printer writes no size, the parser puts it back.
        (name(), prop::option::of(expr())).prop_map(|(n, len)| Item::Buffer(BufferDecl {
            name: ident(n),
            len,
            bytes: Expr {
                kind: ExprKind::Int(128),
                span: Span::default()
            },
            tensormap: true,
            counter: false,
            span: Span::default()
        })),
        // A counter is always 4 bytes: the printer writes no size, the parser puts it back.
        (name(), prop::option::of(expr())).prop_map(|(n, len)| Item::Buffer(BufferDecl {
            name: ident(n),
            len,
            bytes: Expr {
                kind: ExprKind::Int(4),
                span: Span::default()
            },
            tensormap: false,
            counter: true,
            span: Span::default()
        })),
        (name(), expr()).prop_map(|(n, init)| Item::Var(VarDecl { name: ident(n), init })),
        (name(), body()).prop_map(|(n, body)| Item::Completion(CompletionDecl { name: ident(n), body })),
        (
            name(),
            expr(),
            prop::sample::select(vec![RoleUnit::Threads, RoleUnit::Warps, RoleUnit::Warpgroups]),
            any::<bool>(),
            body()
        )
            .prop_map(|(n, count, unit, uniform, body)| Item::Role(RoleDecl {
                name: ident(n),
                count,
                unit,
                uniform: uniform && unit != RoleUnit::Threads,
                body,
                span: Span::default()
            })),
        (name(), prop::collection::vec(name(), 0..3), body()).prop_map(|(n, ps, body)| Item::Function(FnDecl {
            name: ident(n),
            params: ps.into_iter().map(ident).collect(),
            body,
            span: Span::default()
        })),
    ]
}

fn expect() -> impl Strategy<Value = Option<Expect>> {
    prop_oneof![
        Just(None),
        Just(Some(Expect::Holds(Span::default()))),
        prop::collection::vec(prop::sample::select(ViolationKind::ALL.to_vec()), 1..4)
            .prop_map(|ks| Some(Expect::Kinds(ks.into_iter().map(|k| (k, Span::default())).collect()))),
    ]
}

fn program() -> impl Strategy<Value = Program> {
    (
        prop_oneof![
            name(),
            prop::sample::select(vec!["arrive_and_wait", "protocol", "count", "role"]).prop_map(String::from)
        ],
        expect(),
        prop::collection::vec(item(), 0..8),
    )
        .prop_map(|(n, expect, mut items)| {
            // The language allows one `warp_size`.
            let mut seen = false;
            items.retain(|i| !matches!(i, Item::WarpSize(_)) || !std::mem::replace(&mut seen, true));
            Program {
                name: ident(n),
                expect,
                items,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn pretty_then_parse_is_identity(p in program()) {
        let text = pretty(&p);
        let q = match parse(&text) {
            Ok(q) => q,
            Err(d) => return Err(TestCaseError::fail(d.render("pretty", &text))),
        };
        prop_assert!(same_program(&p, &q), "tree changed through:\n{}", text);
    }

    #[test]
    fn pretty_is_a_fixed_point_of_parse_then_pretty(p in program()) {
        let text = pretty(&p);
        let q = parse(&text).map_err(|d| TestCaseError::fail(d.render("pretty", &text)))?;
        prop_assert_eq!(pretty(&q), text);
    }

    #[test]
    fn reparsed_spans_lie_inside_the_text_on_char_boundaries(p in program()) {
        let text = pretty(&p);
        let q = parse(&text).map_err(|d| TestCaseError::fail(d.render("pretty", &text)))?;
        for r in q.roles() {
            let s = &text[r.span.start as usize..r.span.end as usize];
            prop_assert!(s.starts_with("role ") && s.ends_with('}'), "{:?}", s);
        }
        for b in q.barriers() {
            let s = &text[b.span.start as usize..b.span.end as usize];
            prop_assert!(s.starts_with("barrier "), "{:?}", s);
        }
    }

    #[test]
    fn check_never_panics_on_random_trees(p in program()) {
        let _ = check(&p);
    }
}

/// Every problem reported must point inside the source and render without panicking.
fn front_end_is_total(src: &str) -> Result<(), TestCaseError> {
    let diag = match parse(src) {
        Ok(p) => {
            let _ = pretty(&p);
            check(&p).err()
        }
        Err(d) => Some(d),
    };
    if let Some(d) = diag {
        prop_assert!(d.span.start <= d.span.end, "{:?}", d);
        prop_assert!(d.span.end as usize <= src.len(), "{:?}", d);
        prop_assert!(src.is_char_boundary(d.span.start as usize), "{:?}", d);
        prop_assert!(d.code.len() == 4 && d.code.starts_with('E'), "{:?}", d);
        prop_assert!(!d.message.is_empty() && !d.message.contains('\n'));
        let _ = d.render("fuzz.phase", src);
    }
    Ok(())
}

const SEED: &str = r#"protocol double_buffer
expect holds
param STAGES = 2
param ITERS = 4
barrier full[STAGES] count 1
barrier empty[STAGES] count consumer.count
barrier step count 1 completion rotate manual_init
buffer slot[STAGES] bytes 256
var ctrl = 0
completion rotate { ctrl = (ctrl + 1) % 2 }
role producer[1] {
  for i in 0..ITERS {
    let s = i % STAGES
    if i >= STAGES { wait_parity(empty[s], (i / STAGES + 1) % 2) } else if i == 0 { work } else { syncwarp }
    arrive_expect_tx(full[s], 256)
    copy_async(slot[s], full[s], version = i, bytes = 0x100)
  }
}
role consumer[2] {
  for i in 0..ITERS {
    let s = i % STAGES
    wait_parity(full[s], (i / STAGES) % 2)
    read(slot[s], expect = i) /* block
    comment */ let t = arrive(empty[s]); assert !(t < 0) && tid != -1
  }
}
"#;

const PIECES: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ";",
    "\n",
    ".",
    "..",
    "=",
    "==",
    "-",
    "!",
    "&&",
    "//",
    "/*",
    "*/",
    "0x",
    "let",
    "if",
    "else",
    "for",
    "in",
    "count",
    "bytes",
    "expect",
    "version",
    "arrive",
    "wait(",
    "commit(",
    "role",
    "completion",
    "tid",
    "é",
    "\u{0}",
    "99999999999999999999",
    "full[",
    "slot",
    "protocol",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_arbitrary_input(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        front_end_is_total(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn parse_never_panics_on_arbitrary_token_soup(parts in prop::collection::vec(prop::sample::select(PIECES.to_vec()), 0..60), seps in prop::collection::vec(prop::sample::select(vec![" ", "", "\n"]), 60)) {
        let mut s = String::from("protocol p\n");
        for (p, sep) in parts.iter().zip(seps.iter()) {
            s.push_str(p);
            s.push_str(sep);
        }
        front_end_is_total(&s)?;
    }

    #[test]
    fn parse_never_panics_on_mutated_valid_programs(
        edits in prop::collection::vec((0usize..2000, 0usize..6, prop::sample::select(PIECES.to_vec())), 1..6)
    ) {
        let mut s = SEED.to_string();
        for (at, del, ins) in edits {
            let mut at = at % (s.len() + 1);
            while !s.is_char_boundary(at) { at -= 1; }
            let mut end = (at + del).min(s.len());
            while !s.is_char_boundary(end) { end += 1; }
            s.replace_range(at..end, ins);
        }
        front_end_is_total(&s)?;
    }
}

#[test]
fn the_seed_program_is_valid() {
    let p = parse(SEED).unwrap_or_else(|d| panic!("{}", d.render("seed", SEED)));
    check(&p).unwrap_or_else(|d| panic!("{}", d.render("seed", SEED)));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for src in [
        format!(
            "protocol p\nparam A = {}1{}\nrole w[1] {{ work }}\n",
            "(".repeat(100_000),
            ")".repeat(100_000)
        ),
        format!("protocol p\nparam A = {}1\nrole w[1] {{ work }}\n", "-".repeat(100_000)),
        format!("protocol p\nrole w[1] {}{}\n", "{ if 1 ".repeat(50_000), "}".repeat(50_000)),
    ] {
        let d = parse(&src).unwrap_err();
        assert_eq!(d.code, "E005");
        assert!(d.message.contains("nested"), "{}", d.message);
    }
}

/// Two-character operators need no space around them: `a==1||b!=2` is the same program as
/// `a == 1 || b != 2` (each operator takes its two characters, not the name after it).
#[test]
fn two_character_operators_lex_the_same_without_spaces() {
    let prog = |cond: &str| {
        let src = format!("protocol p\nrole w[2] {{\n  let a = tid\n  let b = 1 - tid\n  for i in 0..2 {{\n    assert {cond}\n  }}\n}}\n");
        phasecheck_model::lang::parse(&src).unwrap_or_else(|d| panic!("{cond}: {}", d.message))
    };
    let tight = prog("(a==0||b==0)&&(a!=b||a<=b)&&(a>=0||b>=0)&&i<=1");
    let spaced = prog("(a == 0 || b == 0) && (a != b || a <= b) && (a >= 0 || b >= 0) && i <= 1");
    assert!(phasecheck_model::lang::pretty::same_program(&tight, &spaced));
    let ranged = prog("i<2");
    assert!(phasecheck_model::lang::pretty::same_program(&ranged, &prog("i < 2")));
}
