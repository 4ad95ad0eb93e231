//! Every example of LANGUAGE.md parses, checks, and survives pretty-printing.

use phasecheck_model::kind::ViolationKind;
use phasecheck_model::lang::ast::{Expect, ExprKind, Item, OpKind, StmtKind, Value};
use phasecheck_model::lang::{check, parse, pretty, same_program};

/// Parses and checks `src`, and makes sure the canonical form is a fixed point.
fn accept(src: &str) -> phasecheck_model::lang::ast::Program {
    let p = match parse(src) {
        Ok(p) => p,
        Err(d) => panic!("parse failed:\n{}", d.render("example.phase", src)),
    };
    if let Err(d) = check(&p) {
        panic!("check failed:\n{}", d.render("example.phase", src));
    }
    let printed = pretty(&p);
    let again = parse(&printed).unwrap_or_else(|d| panic!("reparse failed:\n{}", d.render("pretty", &printed)));
    assert!(same_program(&p, &again), "pretty changed the tree:\n{printed}");
    assert_eq!(pretty(&again), printed);
    check(&again).expect("the pretty form checks too");
    p
}

const DOUBLE_BUFFER: &str = r#"// Double buffering with TMA-style copies: CUDA Programming Guide 4.9.7
protocol double_buffer
expect holds
param STAGES = 2
param ITERS = 4
param BYTES = 256

barrier full[STAGES] count 1
barrier empty[STAGES] count consumer.count
buffer slot[STAGES] bytes BYTES

role producer[1] {
  for i in 0..ITERS {
    let s = i % STAGES
    if i >= STAGES { wait_parity(empty[s], (i / STAGES + 1) % 2) }
    arrive_expect_tx(full[s], BYTES)
    copy_async(slot[s], full[s], version = i)
  }
}

role consumer[2] {
  for i in 0..ITERS {
    let s = i % STAGES
    wait_parity(full[s], (i / STAGES) % 2)
    read(slot[s], expect = i)
    arrive(empty[s])
  }
}
"#;

#[test]
fn the_double_buffer_example_parses_and_checks() {
    let p = accept(DOUBLE_BUFFER);
    assert_eq!(p.name.name, "double_buffer");
    assert!(matches!(p.expect, Some(Expect::Holds(_))));
    assert_eq!(p.params().count(), 3);
    assert_eq!(p.barriers().count(), 2);
    assert_eq!(p.roles().count(), 2);
    let empty = p.barriers().nth(1).unwrap();
    assert!(matches!(&empty.count.kind, ExprKind::RoleCount(r) if r == "consumer"));
    let consumer = p.roles().nth(1).unwrap();
    let StmtKind::For { body, .. } = &consumer.body.stmts[0].kind else {
        panic!("a for loop")
    };
    assert_eq!(body.stmts.len(), 4);
    let StmtKind::Op(op) = &body.stmts[2].kind else { panic!("read") };
    assert!(matches!(&op.kind, OpKind::Read { expect: Some(_), .. }));
}

#[test]
fn the_header_example_parses_and_checks() {
    let p = accept(
        "protocol double_buffer            // required, first item\n\
         expect holds                      // optional\n\
         param STAGES = 2                  // overridable\n\
         warp_size 4                       // optional model warp width (default 32)\n\
         role w[1] { work }\n",
    );
    assert!(matches!(p.warp_size().map(|e| &e.kind), Some(ExprKind::Int(4))));
    let p = accept(
        "protocol double_buffer\n\
         expect deadlock, stale-wait       //   several\n\
         role w[1] { work }\n",
    );
    match p.expect {
        Some(Expect::Kinds(ks)) => {
            let ks: Vec<_> = ks.into_iter().map(|(k, _)| k).collect();
            assert_eq!(ks, vec![ViolationKind::Deadlock, ViolationKind::StaleWait]);
        }
        other => panic!("expected kinds, got {other:?}"),
    }
}

#[test]
fn every_violation_kind_can_be_expected() {
    let names: Vec<&str> = ViolationKind::ALL.iter().map(|k| k.name()).collect();
    let src = format!("protocol p\nexpect {}\nrole w[1] {{ work }}\n", names.join(", "));
    let p = accept(&src);
    let Some(Expect::Kinds(ks)) = p.expect else { panic!("kinds") };
    assert_eq!(ks.len(), ViolationKind::ALL.len());
}

const DECLARATIONS: &str = r#"protocol declarations
param STAGES = 2
barrier full[STAGES] count 1                  // array of barriers, each initialised with count 1
barrier done count consumer.count             // ROLE.count = number of threads of that role
barrier step count 4 completion rotate        // runs `completion rotate { ... }` once per phase
barrier late count 2 manual_init              // not initialised up front: a thread must init() it
buffer slot[STAGES] bytes 256                 // shared-memory region; writes stamp a version
var ctrl = 0                                  // shared scalar (control state, completion output)
completion rotate { ctrl = (ctrl + 1) % 2 }   // completion function body
role producer[1] { work }          // one thread
role consumer[2] { work }          // two threads
"#;

#[test]
fn the_declaration_examples_parse_and_check() {
    let p = accept(DECLARATIONS);
    let bars: Vec<_> = p.barriers().collect();
    assert_eq!(bars.len(), 4);
    assert!(bars[0].len.is_some());
    assert_eq!(bars[2].completion.as_ref().unwrap().name, "rotate");
    assert!(bars[3].manual_init && bars[3].completion.is_none());
    assert_eq!(p.vars().count(), 1);
    assert_eq!(p.completions().count(), 1);
    assert_eq!(p.buffers().next().unwrap().name.name, "slot");
}

#[test]
fn barrier_attributes_come_in_any_order() {
    let a = accept("protocol p\nbarrier b count 1 manual_init completion c\ncompletion c { }\nrole w[1] { init(b) }\n");
    let b = accept("protocol p\nbarrier b count 1 completion c manual_init\ncompletion c { }\nrole w[1] { init(b) }\n");
    assert!(same_program(&a, &b));
    let bar = a.barriers().next().unwrap();
    assert!(bar.manual_init && bar.completion.is_some());
}

/// Every statement of the Statements section, with the placeholders filled in.
const STATEMENTS: &str = r#"protocol statements
param BYTES = 256
barrier full[2] count 1
barrier done count 1
barrier step count 4
barrier late count 2 manual_init
buffer slot[2] bytes BYTES
var ctrl = 0

role worker[1] {
  let x = 1 + tid                 ; x = gtid        // thread-local integers
  for i in 0..2 { }               ; if x == 0 { } else { }   // bounds evaluated once at loop entry
  let t = arrive(done)            ; arrive(done, 1)  // token = the phase arrived on
  wait(done, t)                                      // block until t's phase completed
  wait_parity(done, 0)                               // block until the phase of parity P completed
  let ok = try_wait(done, t)      ; let ok2 = try_wait_parity(done, 1)   // never block; 1 or 0
  arrive_and_wait(step)           ; arrive_and_drop(step)
  expect_tx(full[0], BYTES)       ; arrive_expect_tx(full[0], BYTES) ; complete_tx(full[0], BYTES)
  copy_async(slot[0], full[0])                       // TMA-style bulk copy into BUF
  copy_async(slot[1], full[1], bytes = 128, version = 3)
  memcpy_async(slot[0], full[0])                     // libcu++ form
  memcpy_async(slot[1], full[1], version = x, bytes = BYTES / 2)
  read(slot[0])                   ; read(slot[1], expect = 3)
  write(slot[0], 4)               ; let v = ctrl              ; ctrl = lane + warp * v
  init(late)                      ; init(late, 2)             ; inval(late)
  commit(done)                    // warp-batched arrive
  syncwarp                        ; syncthreads
  work                            // independent local work
  assert x >= 0 && !(ok < 0) || ok2 != -1
  x = try_wait(done, t)
  if x == 1 { work } else if x == 2 { syncwarp } else { return }
  return
}
"#;

/// The operations STATEMENTS cannot hold (named barriers, cp.async, the async proxy, elect),
/// each written once, so that the language's whole operation table is exercised.
const MORE_STATEMENTS: &str = r#"protocol more_statements
barrier bar count 1
buffer tile bytes 32
buffer out bytes 32

role worker[1] {
  let e = elect()
  bar_sync(1, 32)                 ; bar_arrive(2, 32)
  cp_async(tile, offset = 0, bytes = 16, version = 0)
  cp_async_arrive(bar)            ; cp_async_arrive_noinc(bar)
  cp_async_commit_group()         ; cp_async_wait_group(0)    ; cp_async_wait_all()
  fence_proxy_async()             ; fence_mbarrier_init()
  copy_store_async(out)           ; commit_group()            ; wait_group(0) ; wait_group_read(0)
  wgmma_async(tile, out)          ; wgmma_wait(0)
}
"#;

/// The cluster barrier's three forms.
const CLUSTER_STATEMENTS: &str = r#"protocol cluster_statements
cluster 2
barrier full count 1
buffer inbox bytes 32
buffer stage bytes 32

role worker[1] {
  cluster_arrive()                ; cluster_wait()            ; cluster_sync()
  cluster_arrive_relaxed()        ; cluster_wait()
  st_async(inbox, full, bytes = 16, version = 1)
  st_async(inbox, full, offset = 16, bytes = 8, version = 2, cta = 1 - cta)
  copy_async(inbox, full, cta = 1 - cta, version = 3)
  copy_async(inbox, full, cta = 1 - cta, from = stage)          // CTA-to-CTA bulk copy
  copy_async(inbox, full, cta = 1, offset = 16, bytes = 16, from = stage)
}
"#;

/// The warpgroup-scoped wgmma: a role of whole warpgroups.
const WARPGROUP_STATEMENTS: &str = r#"protocol warpgroup_statements
barrier full count 1
buffer a bytes 32
buffer b bytes 32

role consumer warpgroups 1 uniform {
  warpgroup_mma(a, b, expect = 0) ; warpgroup_wait(0)
}
"#;

/// A TMA descriptor in shared memory: its edit, its fence, and whole and partial tensor copies
/// through it.
const TENSORMAP_STATEMENTS: &str = r#"protocol tensormap_statements
barrier full count 1
buffer tile bytes 32
tensormap desc
tensormap descs[2]                 // an array of descriptors

role producer[1] {
  tensormap_write(desc, 1)        ; fence_proxy_tensormap(desc)
  tensormap_write(descs[1], 2)    ; fence_proxy_tensormap(descs[1])
  copy_async(tile, full, tensormap = desc, expect = 1)
  copy_async(tile, full, offset = 16, bytes = 16, version = 2, tensormap = descs[1])
}
"#;

/// Counters: atomic adds to the own CTA's and a peer's, and checked reads of both.
const COUNTER_STATEMENTS: &str = r#"protocol counter_statements
cluster 2
counter hits
counter bins[2]                    // an array of counters

role worker[1] {
  atomic_add(hits, 1)             ; atomic_add(bins[1], 2, cta = 1 - cta)
  cluster_sync()
  read_counter(hits, expect = 1)  ; read_counter(bins[0])     ; read_counter(bins[1], cta = 0, expect = 2)
  cluster_sync()
}
"#;

/// Blackwell: tensor memory, the tcgen05 MMA and its commit, cluster launch control.
const BLACKWELL_STATEMENTS: &str = r#"protocol blackwell_statements
barrier done count 1
buffer acc bytes 512
buffer a bytes 128
buffer b bytes 128
buffer resp bytes 16

role mma[1] {
  tmem_alloc(acc, 64)             ; tmem_relinquish()
  tcgen05_mma(acc, a, b, expect = 0, version = 1)
  tcgen05_commit(done)            ; wait_parity(done, 0)
  tcgen05_ld(acc, expect = 1)     ; tcgen05_wait_ld()         ; tmem_dealloc(acc)
  clc_try_cancel(resp, done)
}
"#;

/// Every operation of the parser's table (`lang::parser::OPS`) appears in one of the example
/// bodies above and survives parse, check and pretty-printing: a new operation that the
/// examples do not show fails here.
#[test]
fn every_operation_of_the_table_parses_and_checks() {
    let mut seen = std::collections::BTreeSet::new();
    for src in [
        STATEMENTS,
        MORE_STATEMENTS,
        CLUSTER_STATEMENTS,
        WARPGROUP_STATEMENTS,
        TENSORMAP_STATEMENTS,
        COUNTER_STATEMENTS,
        BLACKWELL_STATEMENTS,
    ] {
        let p = accept(src);
        for role in p.roles() {
            for st in &role.body.stmts {
                match &st.kind {
                    StmtKind::Op(op) => {
                        seen.insert(op.kind.keyword());
                    }
                    StmtKind::Let { value: Value::Op(op), .. } | StmtKind::Assign { value: Value::Op(op), .. } => {
                        seen.insert(op.kind.keyword());
                    }
                    _ => {}
                }
            }
        }
    }
    let missing: Vec<&&str> = phasecheck_model::lang::parser::OPS
        .iter()
        .filter(|op| !seen.contains(**op))
        .collect();
    assert!(missing.is_empty(), "operations of the table no example shows: {missing:?}");
}

#[test]
fn every_statement_form_parses_and_checks() {
    let p = accept(STATEMENTS);
    let role = p.roles().next().unwrap();
    let kws: Vec<&str> = role
        .body
        .stmts
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Op(op) => Some(op.kind.keyword()),
            StmtKind::Let { value: Value::Op(op), .. } | StmtKind::Assign { value: Value::Op(op), .. } => Some(op.kind.keyword()),
            _ => None,
        })
        .collect();
    for op in [
        "arrive",
        "arrive_expect_tx",
        "wait",
        "wait_parity",
        "try_wait",
        "try_wait_parity",
        "arrive_and_wait",
        "arrive_and_drop",
        "expect_tx",
        "complete_tx",
        "copy_async",
        "memcpy_async",
        "read",
        "write",
        "init",
        "inval",
        "commit",
    ] {
        assert!(kws.contains(&op), "{op} missing from {kws:?}");
    }
    // Named arguments in either order land in the right fields.
    let memcpys: Vec<_> = role
        .body
        .stmts
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Op(op) => match &op.kind {
                OpKind::MemcpyAsync { bytes, version, .. } => Some((bytes.is_some(), version.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(memcpys.len(), 2);
    assert!(matches!(&memcpys[1], (true, Some(v)) if matches!(&v.kind, ExprKind::Name(n) if n == "x")));
    // `else if` is an else block holding one if.
    let last_if = role
        .body
        .stmts
        .iter()
        .rev()
        .find(|s| matches!(s.kind, StmtKind::If { .. }))
        .unwrap();
    let StmtKind::If { els: Some(els), .. } = &last_if.kind else {
        panic!("else")
    };
    assert_eq!(els.stmts.len(), 1);
    assert!(matches!(&els.stmts[0].kind, StmtKind::If { els: Some(_), .. }));
}

#[test]
fn line_breaks_continue_inside_parentheses_and_after_operators() {
    let p = accept(
        "protocol p\n\
         param A = 1 +\n    2\n\
         barrier b count 1\n\
         role w[1] {\n  let x = (A\n  * 3)\n  wait_parity(b,\n    x % 2)\n\n\n  let y = x ==\n 3 ||\n x < 0\n}\n\
         role v[1] {\n  if tid == 0 {\n    work\n  }\n  else {\n    return\n  }\n}\n",
    );
    let a = p.params().next().unwrap();
    assert!(matches!(a.value.kind, ExprKind::Binary(..)));
    assert_eq!(p.roles().next().unwrap().body.stmts.len(), 3);
    let v = p.roles().nth(1).unwrap();
    assert!(matches!(&v.body.stmts[0].kind, StmtKind::If { els: Some(_), .. }));
}

#[test]
fn declarations_may_come_in_any_order() {
    accept("protocol p\nrole c[2] { arrive(b) }\nbarrier b count c.count completion f\nvar n = 0\ncompletion f { n = n + 1 }\n");
}

#[test]
fn integers_in_every_form() {
    let p = accept("protocol p\nparam A = 1_024\nparam B = 0x400\nparam C = 0xff_ff\nrole w[1] { assert A == B }\n");
    let vals: Vec<i64> = p
        .params()
        .map(|d| match d.value.kind {
            ExprKind::Int(v) => v,
            _ => panic!("int"),
        })
        .collect();
    assert_eq!(vals, vec![1024, 1024, 0xffff]);
}

#[test]
fn precedence_and_associativity() {
    let p = accept("protocol p\nparam A = 1 - 2 - 3 * 4 % 5\nparam B = -A + !A < 2 == 1 || 0 && 1\nrole w[1] { work }\n");
    // (1 - 2) - ((3 * 4) % 5)
    let a = &p.params().next().unwrap().value;
    assert_eq!(phasecheck_model::lang::pretty::expr(a), "1 - 2 - 3 * 4 % 5");
    let ExprKind::Binary(op, l, r) = &a.kind else { panic!() };
    assert_eq!(op.symbol(), "-");
    assert!(matches!(&l.kind, ExprKind::Binary(o, ..) if o.symbol() == "-"));
    assert!(matches!(&r.kind, ExprKind::Binary(o, ..) if o.symbol() == "%"));
    let b = &p.params().nth(1).unwrap().value;
    let ExprKind::Binary(op, _, r) = &b.kind else { panic!() };
    assert_eq!(op.symbol(), "||");
    assert!(matches!(&r.kind, ExprKind::Binary(o, ..) if o.symbol() == "&&"));
    // Parentheses that matter survive; the others go.
    let p = accept("protocol p\nparam A = (1 - (2 - 3)) * ((4))\nrole w[1] { work }\n");
    assert_eq!(
        phasecheck_model::lang::pretty::expr(&p.params().next().unwrap().value),
        "(1 - (2 - 3)) * 4"
    );
}

#[test]
fn spans_point_at_the_source() {
    let src = DOUBLE_BUFFER;
    let p = parse(src).unwrap();
    let full = p.barriers().next().unwrap();
    assert_eq!(&src[full.name.span.start as usize..full.name.span.end as usize], "full");
    assert_eq!(
        &src[full.span.start as usize..full.span.end as usize],
        "barrier full[STAGES] count 1"
    );
    let role = p.roles().next().unwrap();
    let text = &src[role.span.start as usize..role.span.end as usize];
    assert!(text.starts_with("role producer[1] {") && text.ends_with('}'));
    let StmtKind::For { body, .. } = &role.body.stmts[0].kind else {
        panic!()
    };
    let copy = &body.stmts[3];
    assert_eq!(
        &src[copy.span.start as usize..copy.span.end as usize],
        "copy_async(slot[s], full[s], version = i)"
    );
    let items_ok = p.items.iter().all(|i| !matches!(i, Item::WarpSize(_)));
    assert!(items_ok);
}

#[test]
fn the_protocol_name_may_be_any_word() {
    // specs/guide/arrive_and_wait.phase is named after the operation it shows.
    let p = accept("protocol arrive_and_wait\nbarrier b count 1\nrole w[1] { arrive_and_wait(b) }\n");
    assert_eq!(p.name.name, "arrive_and_wait");
}

/// The example specs of the repository (specs/**/*.phase) are accepted and survive `pretty`.
#[test]
fn every_spec_in_the_repository_parses_checks_and_round_trips() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let mut stack = vec![root];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "phase") {
                let src = std::fs::read_to_string(&path).unwrap();
                let name = path.display().to_string();
                let p = parse(&src).unwrap_or_else(|d| panic!("{}", d.render(&name, &src)));
                check(&p).unwrap_or_else(|d| panic!("{}", d.render(&name, &src)));
                let printed = pretty(&p);
                let q = parse(&printed).unwrap_or_else(|d| panic!("{}", d.render("pretty", &printed)));
                assert!(same_program(&p, &q), "{name}: pretty changed the tree:\n{printed}");
                seen += 1;
            }
        }
    }
    eprintln!("{seen} specs");
}
