//! One evaluation semantics: the runtime evaluates the model's lowered expressions, so a guard
//! protects its right side (`&&`, `||` short-circuit) and arithmetic faults where the model says.
//! The law here generates expressions over every operator of the language, makes their values
//! observable (written as a version and read back), and checks every runtime outcome against the
//! model's allowed set.
#![cfg(not(loom))]

use phasecheck_model::api::{parse_spec, SpecBuilder};
use phasecheck_model::rt::Model;
use phasecheck_runtime::{run, Options};
use phasecheck_verifier::outcomes::allowed_outcomes_capped;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use std::time::Duration;

/// Every binary operator of the language, as written.
const BINARY: [&str; 13] = ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||"];
/// Every unary operator.
const UNARY: [&str; 2] = ["-", "!"];

#[test]
fn the_short_circuit_guard_gives_the_models_outcome_on_the_runtime() {
    // Thread 0 would divide by zero on the right of `&&`; the left side stops it in both.
    let src = "protocol guarded\nexpect holds\nbarrier b count 2\nbuffer out[2] bytes 4\n\
               role w[2] {\n  if tid != 0 && 10 / tid > 1 { write(out[tid], 7) } else { write(out[tid], 3) }\n  \
               read(out[tid])\n  arrive(b)\n}\n";
    let spec = parse_spec("guarded.phase", src, &[]).unwrap();
    let allowed = allowed_outcomes_capped(&Model::new(spec.proto.clone()), 100_000, 100_000);
    assert!(allowed.is_complete());
    assert!(!allowed.summary().contains("undefined"), "the model finds no fault: {allowed}");
    for seed in 0..20 {
        let r = run(
            &spec.proto,
            &Options {
                seed,
                ..Options::default()
            },
        )
        .unwrap();
        assert!(r.ub.is_none(), "the runtime faulted: {:?}", r.ub);
        assert!(allowed.contains(&r.outcome), "outcome {} outside {allowed}", r.outcome);
        assert_eq!(r.outcome.threads[0].reads, vec![3]);
        assert_eq!(r.outcome.threads[1].reads, vec![7]);
    }
}

#[test]
fn a_fault_on_the_evaluated_side_is_undefined_behaviour_in_both() {
    // Without the guard thread 0 divides by zero: an assertion in the model and on the runtime.
    let spec = SpecBuilder::new("unguarded")
        .buffer("out[2] bytes 4")
        .role("w", 2, "write(out[tid], 10 / tid)\nread(out[tid])")
        .build()
        .unwrap();
    let allowed = allowed_outcomes_capped(&Model::new(spec.proto.clone()), 100_000, 100_000);
    let r = run(&spec.proto, &Options::default()).unwrap();
    assert_eq!(r.ub.map(|u| u.kind), Some(phasecheck_model::ViolationKind::Assertion));
    assert!(allowed.contains(&r.outcome), "{} outside {allowed}", r.outcome);
}

/// An expression over thread identity, a loop local, small constants and every operator.
fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        (-3i64..12).prop_map(|c| if c < 0 { format!("({c})") } else { c.to_string() }),
        Just("tid".to_string()),
        Just("lane".to_string()),
        Just("i".to_string()),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (inner.clone(), 0..BINARY.len(), inner.clone()).prop_map(|(a, op, b)| format!("({a} {} {b})", BINARY[op])),
            (0..UNARY.len(), inner).prop_map(|(op, a)| format!("{}({a})", UNARY[op])),
        ]
    })
}

/// Two threads, two rounds: each round writes the value of `value` (a version) into its own
/// slot, reads it back (recorded), and arrives on a shared barrier when `guard` holds.
fn protocol_text(value: &str, guard: &str) -> String {
    format!(
        "protocol exprs\nbarrier b count 4\nbuffer out[2] bytes 4\n\
         role w[2] {{\n  for i in 0..2 {{\n    write(out[tid], {value})\n    read(out[tid])\n    \
         if {guard} {{ arrive(b) }}\n  }}\n}}\n"
    )
}

#[test]
fn the_expression_generator_reaches_every_operator() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut text = String::new();
    for _ in 0..400 {
        text.push_str(&expr().new_tree(&mut runner).unwrap().current());
    }
    for op in BINARY {
        assert!(text.contains(&format!(" {op} ")), "no `{op}` generated");
    }
    assert!(text.contains("-("), "no unary minus generated");
    assert!(text.contains("!("), "no `!` generated");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Law: on protocols whose values and branches are expressions over every operator
    /// (short-circuit, division and remainder faults, comparisons, unary), every runtime outcome
    /// is one the model allows.
    #[test]
    fn cpu_outcomes_on_every_operator_are_within_the_models_allowed_set(value in expr(), guard in expr(), seed in any::<u64>()) {
        let src = protocol_text(&value, &guard);
        let spec = parse_spec("exprs.phase", &src, &[]).map_err(TestCaseError::fail)?;
        let allowed = allowed_outcomes_capped(&Model::new(spec.proto.clone()), 50_000, 200_000);
        prop_assume!(allowed.is_complete());
        let opts = Options { seed, quiet: Duration::from_millis(20), ..Options::default() };
        let r = run(&spec.proto, &opts).map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert!(allowed.contains(&r.outcome), "{}\noutcome: {}\nub: {:?}\nmodel allows: {}", src, r.outcome, r.ub, allowed);
    }
}
