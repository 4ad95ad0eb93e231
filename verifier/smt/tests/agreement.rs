//! Z3 checks the explicit model, and the explicit model checks Z3: on small instances of a family
//! of pipeline protocols (ring buffers with random stage counts, trip counts, consumer counts,
//! byte counts, parity offsets and count mistakes), every verdict of `prove` must agree with what
//! the explicit search finds.
//!
//! - `proved`: the explicit search finds none of the counting kinds (deadlock, over-arrival,
//!   count-range, tx-range, stale-wait).
//! - `refuted` by law L: the explicit search finds one of the kinds L shows up as.
//! - `unknown`: never, for this family (it is inside the encodable fragment by construction).
//!
//! A failure names the law (or the kinds) on which the two checkers disagree: a bug in one of them.

use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::Model;
use phasecheck_smt::{prove, Options, Outcome, Range, COUNTING_KINDS};
use phasecheck_verifier::{check, CheckOptions, Verdict};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Shape {
    stages: i64,
    iters: i64,
    consumers: i64,
    bytes: i64,
    /// Producer's wait on `empty`: parity offset (1 is right).
    prod_offset: i64,
    /// CUTLASS style: the producer waits from the first iteration ("buffers start empty").
    cutlass_start: bool,
    /// Consumer's wait on `full`: parity offset (0 is right).
    cons_offset: i64,
    /// Bytes announced minus bytes copied.
    tx_delta: i64,
    /// `full` count minus 1.
    full_delta: i64,
    /// `empty` count minus the number of consumers.
    empty_delta: i64,
    /// Consumer trip count minus the producer's.
    cons_iters_delta: i64,
}

/// A correct pipeline with at most one counting mistake: a phase offset, a byte count, a barrier
/// count or a trip count. One mistake at a time keeps each comparison about one law: two
/// mistakes can mask each other in the explicit search (a consumer that never really waits hides
/// a count shortfall), which says nothing about either checker.
fn shape() -> impl Strategy<Value = Shape> {
    (
        1i64..=2,
        1i64..=4,
        1i64..=2,
        prop_oneof![Just(64i64), Just(128)],
        any::<bool>(),
        prop_oneof![3 => Just(0usize), 7 => 1usize..=7],
        prop_oneof![Just(1i64), Just(-1)],
    )
        .prop_map(|(stages, iters, consumers, bytes, cutlass_start, mistake, sign)| {
            let mut s = Shape {
                stages,
                iters,
                consumers,
                bytes,
                prod_offset: 1,
                cutlass_start,
                cons_offset: 0,
                tx_delta: 0,
                full_delta: 0,
                empty_delta: 0,
                cons_iters_delta: 0,
            };
            match mistake {
                1 => s.prod_offset = 0,
                2 => s.cons_offset = 1,
                3 => s.tx_delta = 64,
                4 => s.tx_delta = -32,
                5 => s.full_delta = 1,
                6 => s.empty_delta = if consumers + sign >= 1 { sign } else { 1 },
                7 => s.cons_iters_delta = if iters + sign >= 0 { sign } else { 1 },
                _ => {}
            }
            s
        })
}

fn render(s: &Shape) -> String {
    let sign = |d: i64| match d {
        0 => String::new(),
        d if d > 0 => format!(" + {d}"),
        d => format!(" - {}", -d),
    };
    let prod_wait = if s.cutlass_start {
        format!("    wait_parity(empty[s], (i / STAGES + {}) % 2)\n", s.prod_offset)
    } else {
        format!(
            "    if i >= STAGES {{ wait_parity(empty[s], (i / STAGES + {}) % 2) }}\n",
            s.prod_offset
        )
    };
    format!(
        "protocol generated\nparam STAGES = {}\nparam ITERS = {}\nparam BYTES = {}\n\
         barrier full[STAGES] count 1{}\nbarrier empty[STAGES] count consumer.count{}\n\
         buffer slot[STAGES] bytes BYTES\n\n\
         role producer[1] {{\n  for i in 0..ITERS {{\n    let s = i % STAGES\n{}    arrive_expect_tx(full[s], BYTES{})\n    copy_async(slot[s], full[s], version = i)\n  }}\n}}\n\n\
         role consumer[{}] {{\n  for i in 0..ITERS{} {{\n    let s = i % STAGES\n    wait_parity(full[s], (i / STAGES + {}) % 2)\n    read(slot[s], expect = i)\n    arrive(empty[s])\n  }}\n}}\n",
        s.stages,
        s.iters,
        s.bytes,
        sign(s.full_delta),
        sign(s.empty_delta),
        prod_wait,
        sign(s.tx_delta),
        s.consumers,
        sign(s.cons_iters_delta),
        s.cons_offset,
    )
}

/// `Err(reason)` on a disagreement.
fn agree(src: &str) -> Result<(), String> {
    let ast = lang::parse(src).map_err(|d| format!("generator wrote bad input: {}", d.render("generated", src)))?;
    lang::check(&ast).map_err(|d| d.render("generated", src))?;
    let proto = lower(&ast, &[]).map_err(|d| d.render("generated", src))?;
    let model = Model::new(proto);
    let r = check(
        &model,
        &CheckOptions {
            max_states: Some(2_000_000),
            ..CheckOptions::default()
        },
    );
    if r.verdict == Verdict::Incomplete {
        return Ok(()); // too big to compare: not a verdict
    }
    let kinds: Vec<&str> = r.violations.iter().map(|v| v.kind.name()).collect();
    let counting: Vec<&str> = kinds.iter().copied().filter(|k| COUNTING_KINDS.contains(k)).collect();
    let p = prove(
        &ast,
        &Options {
            timeout_ms: 20_000,
            ..Options::default()
        },
    );
    // The same instance with ITERS and the consumer count as Z3 variables pinned by one-value
    // ranges: the symbolic encoding must reach the same verdict and law.
    let pinned = prove(
        &ast,
        &Options {
            timeout_ms: 20_000,
            ranges: vec![
                Range {
                    name: "ITERS".into(),
                    lo: iters_of(src),
                    hi: iters_of(src),
                },
                Range {
                    name: "consumer".into(),
                    lo: consumers_of(src),
                    hi: consumers_of(src),
                },
            ],
            ..Options::default()
        },
    );
    let verdict = |o: &Outcome| match o {
        Outcome::Proved => "proved".to_string(),
        Outcome::Refuted(cx) => format!("refuted ({})", cx.law.name()),
        Outcome::Unknown { reason, .. } => format!("unknown ({reason})"),
    };
    if verdict(&pinned.outcome) != verdict(&p.outcome) {
        return Err(format!(
            "prove answers {} at the declared values but {} with ITERS and consumer.count symbolic",
            verdict(&p.outcome),
            verdict(&pinned.outcome)
        ));
    }
    match p.outcome {
        Outcome::Proved if counting.is_empty() => Ok(()),
        Outcome::Proved => Err(format!(
            "prove proved every counting law but the explicit search finds {counting:?} (all: {kinds:?})"
        )),
        Outcome::Refuted(cx) => {
            if cx.law.explicit_kinds().iter().any(|k| kinds.contains(k)) {
                Ok(())
            } else {
                Err(format!(
                    "prove refutes law {} on `{}` ({}; at {:?}, {:?}) but the explicit search finds {kinds:?}, none of {:?}",
                    cx.law.name(),
                    cx.group,
                    cx.what,
                    cx.assignment,
                    cx.details,
                    cx.law.explicit_kinds()
                ))
            }
        }
        Outcome::Unknown { reason, .. } => Err(format!("prove answered unknown inside the encodable family: {reason}")),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn prove_agrees_with_the_explicit_search(s in shape()) {
        let src = render(&s);
        if let Err(why) = agree(&src) {
            prop_assert!(false, "{why}\n--- spec ---\n{src}");
        }
    }
}

/// The hand-picked corners of the family, each with the verdict it must get (so that the
/// property above cannot pass by proving or refuting everything).
#[test]
fn corners_get_the_expected_verdicts() {
    let base = Shape {
        stages: 2,
        iters: 4,
        consumers: 2,
        bytes: 64,
        prod_offset: 1,
        cutlass_start: false,
        cons_offset: 0,
        tx_delta: 0,
        full_delta: 0,
        empty_delta: 0,
        cons_iters_delta: 0,
    };
    let cases: Vec<(Shape, &[&str])> = vec![
        (base.clone(), &[]),
        (
            Shape {
                cutlass_start: true,
                ..base.clone()
            },
            &[],
        ),
        (
            Shape {
                cons_offset: 1,
                ..base.clone()
            },
            &["parity"],
        ),
        // waits on the phase its own later copy completes: a cycle, seen first as a wait the
        // barrier can outrun or as the cycle itself
        (
            Shape {
                prod_offset: 0,
                ..base.clone()
            },
            &["wait-order", "parity"],
        ),
        (
            Shape {
                tx_delta: 64,
                ..base.clone()
            },
            &["tx-balance"],
        ),
        (
            Shape {
                full_delta: 1,
                ..base.clone()
            },
            &["arrivals"],
        ),
        (
            Shape {
                empty_delta: 1,
                ..base.clone()
            },
            &["arrivals"],
        ),
    ];
    for (s, want) in cases {
        let src = render(&s);
        let ast = lang::parse(&src).unwrap();
        let p = prove(&ast, &Options::default());
        match &p.outcome {
            Outcome::Proved if want.is_empty() => {}
            Outcome::Refuted(cx) if want.contains(&cx.law.name()) => {}
            o => panic!("{s:?}: wanted {want:?}, got {o:?}\n{src}"),
        }
        agree(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    }
}

fn param_of(src: &str, prefix: &str) -> i64 {
    src.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.trim().split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|v| v.parse().ok())
        .expect("generated spec declares it")
}
fn iters_of(src: &str) -> i64 {
    param_of(src, "param ITERS = ")
}
fn consumers_of(src: &str) -> i64 {
    param_of(src, "role consumer[")
}
