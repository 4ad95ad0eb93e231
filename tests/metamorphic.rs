//! Metamorphic laws over random well-formed protocols.
//!
//! The generator builds programs (barriers, roles, statements as data), not text; each law
//! transforms a program into one that must get the same verdict, and every check of every program
//! runs with the semantic self-check on, so a step that breaks an invariant of SEMANTICS.md fails
//! here even when no verdict changes. Each property is named by its law.

// The shared CLI-test module also sets the binary's allocator (mimalloc) for the searches here.
mod common;

use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::Model;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, CheckOptions, Verdict};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// An expression a wait's parity may be: a constant, the shared var `v` (never written, so
/// reading it early or late cannot differ), or a loop-variable formula over it.
#[derive(Clone, Debug)]
enum Par {
    Const(i64),
    Var,
    LoopVar,
}

#[derive(Clone, Debug)]
enum Stmt {
    Arrive(usize),
    ArriveAndWait(usize),
    WaitParity(usize, Par),
    /// `let t = arrive(b); wait(b, t)`.
    SplitArriveWait(usize),
    /// `arrive_expect_tx(b, 16); copy_async(buf, b)`, then a wait on parity `Par`.
    CopyAndWait(usize, Par),
    Read,
    Work,
    /// `for i in 0..n { body }`.
    Loop(i64, Vec<Stmt>),
    /// `arrive_and_drop(b); return`.
    DropAndExit(usize),
    // Issue 13.
    /// `cp_async(buf, offset = 8 * half, bytes = 8)` then `cp_async_arrive(b)` (or `_noinc`).
    CpAsyncArrive(usize, bool, i64),
    /// `arrive_expect_tx(b, 8); copy_async(buf, b, offset = 8 * half, bytes = 8)`, then a wait.
    PartCopyAndWait(usize, i64, Par),
    /// `read(buf, offset = 8 * half, bytes = 8)`.
    ReadPart(i64),
    /// `bar_sync(id, 32)` or `bar_arrive(id, 32)`: every generated role lives in warp 0.
    Named(i64, bool),
}

#[derive(Clone, Debug)]
struct Role {
    name: String,
    count: u32,
    body: Vec<Stmt>,
}

#[derive(Clone, Debug)]
struct Proto {
    counts: Vec<u32>,
    var: i64,
    roles: Vec<Role>,
}

fn par_text(p: &Par, var: &str, in_loop: bool) -> String {
    match p {
        Par::Const(c) => c.to_string(),
        Par::Var => var.to_string(),
        Par::LoopVar if in_loop => format!("(i + {var}) % 2"),
        Par::LoopVar => var.to_string(),
    }
}

fn stmts_text(out: &mut String, body: &[Stmt], var: &str, in_loop: bool, indent: usize, fresh: &mut usize) {
    let pad = "  ".repeat(indent);
    for s in body {
        match s {
            Stmt::Arrive(b) => out.push_str(&format!("{pad}arrive(b{b})\n")),
            Stmt::ArriveAndWait(b) => out.push_str(&format!("{pad}arrive_and_wait(b{b})\n")),
            Stmt::WaitParity(b, p) => out.push_str(&format!("{pad}wait_parity(b{b}, {})\n", par_text(p, var, in_loop))),
            Stmt::SplitArriveWait(b) => {
                *fresh += 1;
                out.push_str(&format!("{pad}let t{fresh} = arrive(b{b})\n{pad}wait(b{b}, t{fresh})\n"))
            }
            Stmt::CopyAndWait(b, p) => out.push_str(&format!(
                "{pad}arrive_expect_tx(b{b}, 16)\n{pad}copy_async(buf, b{b})\n{pad}wait_parity(b{b}, {})\n",
                par_text(p, var, in_loop)
            )),
            Stmt::Read => out.push_str(&format!("{pad}read(buf)\n")),
            Stmt::Work => out.push_str(&format!("{pad}work\n")),
            Stmt::Loop(n, inner) => {
                out.push_str(&format!("{pad}for i in 0..{n} {{\n"));
                stmts_text(out, inner, var, true, indent + 1, fresh);
                out.push_str(&format!("{pad}}}\n"));
            }
            Stmt::DropAndExit(b) => out.push_str(&format!("{pad}arrive_and_drop(b{b})\n{pad}return\n")),
            Stmt::CpAsyncArrive(b, noinc, half) => out.push_str(&format!(
                "{pad}cp_async(buf, offset = {}, bytes = 8)\n{pad}cp_async_arrive{}(b{b})\n",
                8 * half,
                if *noinc { "_noinc" } else { "" }
            )),
            Stmt::PartCopyAndWait(b, half, p) => out.push_str(&format!(
                "{pad}arrive_expect_tx(b{b}, 8)\n{pad}copy_async(buf, b{b}, offset = {}, bytes = 8)\n{pad}wait_parity(b{b}, {})\n",
                8 * half,
                par_text(p, var, in_loop)
            )),
            Stmt::ReadPart(half) => out.push_str(&format!("{pad}read(buf, offset = {}, bytes = 8)\n", 8 * half)),
            Stmt::Named(id, sync) => out.push_str(&format!("{pad}{}({id}, 32)\n", if *sync { "bar_sync" } else { "bar_arrive" })),
        }
    }
}

/// The program as `.phase` text. `hoist`: every read of the shared var `v` in a role body is
/// replaced by a local read from it once, at the top of the role.
fn render(p: &Proto, roles: &[Role], hoist: bool) -> String {
    let mut out = String::from("protocol generated\n");
    for (i, c) in p.counts.iter().enumerate() {
        out.push_str(&format!("barrier b{i} count {c}\n"));
    }
    out.push_str("buffer buf bytes 16\n");
    out.push_str(&format!("var v = {}\n", p.var));
    for r in roles {
        out.push_str(&format!("role {}[{}] {{\n", r.name, r.count));
        let var = if hoist {
            out.push_str("  let hv = v\n");
            "hv"
        } else {
            "v"
        };
        stmts_text(&mut out, &r.body, var, false, 1, &mut 0);
        out.push_str("}\n");
    }
    out
}

fn arb_stmt(barriers: usize) -> impl Strategy<Value = Stmt> {
    let b = 0..barriers;
    let par = prop_oneof![(0..2i64).prop_map(Par::Const), Just(Par::Var), Just(Par::LoopVar)];
    let leaf = prop_oneof![
        3 => b.clone().prop_map(Stmt::Arrive),
        3 => b.clone().prop_map(Stmt::ArriveAndWait),
        3 => (b.clone(), par.clone()).prop_map(|(b, p)| Stmt::WaitParity(b, p)),
        2 => b.clone().prop_map(Stmt::SplitArriveWait),
        2 => (b.clone(), par.clone()).prop_map(|(b, p)| Stmt::CopyAndWait(b, p)),
        1 => Just(Stmt::Read),
        1 => Just(Stmt::Work),
        1 => b.clone().prop_map(Stmt::DropAndExit),
        1 => (b.clone(), any::<bool>(), 0..2i64).prop_map(|(b, n, h)| Stmt::CpAsyncArrive(b, n, h)),
        1 => (b, 0..2i64, par.clone()).prop_map(|(b, h, p)| Stmt::PartCopyAndWait(b, h, p)),
        1 => (0..2i64).prop_map(Stmt::ReadPart),
        1 => (0..2i64, any::<bool>()).prop_map(|(id, s)| Stmt::Named(id, s)),
    ];
    leaf.prop_recursive(1, 6, 3, |inner| {
        (1..3i64, prop::collection::vec(inner, 1..3)).prop_map(|(n, body)| Stmt::Loop(n, body))
    })
}

fn arb_proto() -> impl Strategy<Value = Proto> {
    (1..3usize, 0..2i64).prop_flat_map(|(nb, var)| {
        let role = (1..3u32, prop::collection::vec(arb_stmt(nb), 1..4));
        (prop::collection::vec(1..4u32, nb), prop::collection::vec(role, 1..3)).prop_map(move |(counts, roles)| Proto {
            counts,
            var,
            roles: roles
                .into_iter()
                .enumerate()
                .map(|(i, (count, body))| Role {
                    name: format!("r{i}"),
                    count,
                    body,
                })
                .collect(),
        })
    })
}

/// Kinds found, or `None` when the bounded search did not finish (no law is asserted then).
fn kinds(src: &str) -> Option<BTreeSet<ViolationKind>> {
    kinds_with(src, true, true, 1)
}

fn kinds_with(src: &str, symmetry: bool, por: bool, threads: usize) -> Option<BTreeSet<ViolationKind>> {
    let ast = lang::parse(src).unwrap_or_else(|d| panic!("generated text does not parse: {d:?}\n{src}"));
    lang::check(&ast).unwrap_or_else(|d| panic!("generated program does not check: {d:?}\n{src}"));
    let proto = lower(&ast, &[]).unwrap_or_else(|d| panic!("generated program does not lower: {d:?}\n{src}"));
    let opts = CheckOptions {
        max_states: Some(20_000),
        self_check: true,
        symmetry,
        por,
        threads,
        ..CheckOptions::default()
    };
    let r = check(&Model::new(proto), &opts);
    assert_ne!(
        r.verdict,
        Verdict::InternalError,
        "{}\n{src}",
        r.internal.map(|i| i.describe()).unwrap_or_default()
    );
    (r.bound.is_none()).then(|| r.violations.iter().map(|v| v.kind).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Law: reading a shared var that nobody writes at the wait, or once into a local beforehand,
    /// gives the same verdict (a wait's readiness must see the var's value).
    #[test]
    fn hoisting_unwritten_shared_var_reads_into_locals_keeps_the_verdict(p in arb_proto()) {
        let direct = kinds(&render(&p, &p.roles, false));
        prop_assume!(direct.is_some());
        let hoisted = kinds(&render(&p, &p.roles, true));
        // A case whose search hit its bound is not counted: 256 cases are compared in full. Each
        // law rejects a case at its first search that does not finish, before the others run.
        prop_assume!(direct.is_some() && hoisted.is_some());
        prop_assert_eq!(direct, hoisted);
    }

    /// Law: a role of two threads and the same body written as two roles of one thread each
    /// (same arrivals, no warp-batched operation) get the same verdict.
    #[test]
    fn splitting_a_role_into_two_roles_with_the_same_body_keeps_the_verdict(p in arb_proto()) {
        let mut split = Vec::new();
        for r in &p.roles {
            if r.count == 2 {
                split.push(Role { name: format!("{}a", r.name), count: 1, body: r.body.clone() });
                split.push(Role { name: format!("{}b", r.name), count: 1, body: r.body.clone() });
            } else {
                split.push(r.clone());
            }
        }
        let merged = kinds(&render(&p, &p.roles, false));
        prop_assume!(merged.is_some());
        let parted = kinds(&render(&p, &split, false));
        prop_assume!(merged.is_some() && parted.is_some());
        prop_assert_eq!(merged, parted);
    }

    /// Law: the symmetry reduction (interchangeable threads stored once) and expansion on two
    /// threads find exactly the kinds the unreduced, single-threaded search finds.
    #[test]
    fn symmetry_and_parallel_expansion_keep_the_violation_kinds(p in arb_proto()) {
        let src = render(&p, &p.roles, false);
        let plain = kinds_with(&src, false, false, 1);
        prop_assume!(plain.is_some());
        let reduced = kinds_with(&src, true, false, 1);
        let parallel = kinds_with(&src, true, false, 2);
        prop_assume!(plain.is_some() && reduced.is_some() && parallel.is_some());
        prop_assert_eq!(&plain, &reduced);
        prop_assert_eq!(&reduced, &parallel);
    }

    /// Law: the partial-order reduction (persistent sets over static footprints, with the cycle
    /// proviso), alone, with symmetry, and expanded on two threads, finds exactly the kinds the
    /// unreduced search finds (every state checked by the self-check on the way).
    #[test]
    fn partial_order_reduction_keeps_the_violation_kinds(p in arb_proto()) {
        let src = render(&p, &p.roles, false);
        let plain = kinds_with(&src, false, false, 1);
        prop_assume!(plain.is_some());
        let por = kinds_with(&src, false, true, 1);
        let both = kinds_with(&src, true, true, 1);
        let parallel = kinds_with(&src, true, true, 2);
        prop_assume!(plain.is_some() && por.is_some() && both.is_some() && parallel.is_some());
        prop_assert_eq!(&plain, &por);
        prop_assert_eq!(&plain, &both);
        prop_assert_eq!(&both, &parallel);
    }

    /// Law: `fmt` prints a program that parses back to the same program, and printing is a fixed
    /// point.
    #[test]
    fn fmt_output_parses_back_to_the_same_program(p in arb_proto()) {
        let src = render(&p, &p.roles, false);
        let ast = lang::parse(&src).unwrap();
        let once = lang::pretty(&ast);
        let again = lang::parse(&once).unwrap_or_else(|d| panic!("fmt output does not parse: {d:?}\n{once}"));
        prop_assert!(lang::same_program(&ast, &again));
        prop_assert_eq!(lang::pretty(&again), once);
    }
}
