//! Minimization keeps the violation and never makes a trace longer (or, at equal length, more
//! switchy), for traces found by random walks rather than by the breadth-first search.

use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::ViolationKind;
use phasecheck_verifier::minimize::{context_switches, first_reach, minimize};
use phasecheck_verifier::tracefile::raised_by;
use proptest::prelude::*;

const SPECS: &[&str] = &[
    // Consumer parity off by one: data-race, stale-read, stale-wait, deadlock, ...
    r#"protocol wrong_parity
param STAGES = 2
param ITERS = 3
barrier full[STAGES] count 1
barrier empty[STAGES] count consumer.count
buffer slot[STAGES] bytes 64
role producer[1] {
  for i in 0..ITERS {
    let s = i % STAGES
    if i >= STAGES { wait_parity(empty[s], (i / STAGES + 1) % 2) }
    arrive_expect_tx(full[s], 64)
    copy_async(slot[s], full[s], version = i)
  }
}
role consumer[2] {
  for i in 0..ITERS {
    let s = i % STAGES
    wait_parity(full[s], (i / STAGES + 1) % 2)
    read(slot[s], expect = i)
    arrive(empty[s])
  }
}
"#,
    // Too many arrivals, with bystanders doing independent work.
    r#"protocol over
barrier b count 3
role a[2] {
  work
  arrive(b, 2)
  work
}
role idle[2] {
  work
  work
  work
}
"#,
    // A producer overwrites a slot the consumer has not released.
    r#"protocol overwrite
barrier full count 1
barrier empty count 1
buffer slot bytes 16
role producer[1] {
  write(slot, 1)
  arrive(full)
  write(slot, 2)
  arrive(full)
}
role consumer[1] {
  wait_parity(full, 0)
  read(slot, expect = 1)
  arrive(empty)
}
role other[1] {
  work
  work
}
"#,
];

fn model(i: usize) -> Model {
    let ast = lang::parse(SPECS[i]).expect("parses");
    lang::check(&ast).expect("checks");
    Model::new(lower(&ast, &[]).expect("lowers"))
}

/// Follow `choices` through the enabled actions until a violation; return its kind and the path.
fn walk(m: &Model, choices: &[u16]) -> Option<(ViolationKind, Vec<Action>)> {
    let (mut r, _) = Replay::start(m);
    let mut path = Vec::new();
    for &c in choices {
        let s = r.state()?;
        if let Some(v) = m.state_violations(s, r.enabled()).first() {
            return Some((v.kind, path));
        }
        if r.enabled().is_empty() {
            return None;
        }
        let a = r.enabled()[c as usize % r.enabled().len()];
        path.push(a);
        let step = r.take(a).expect("an enabled action replays");
        if let Some(v) = step.outcome.violations.first() {
            return Some((v.kind, path));
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn minimized_trace_replays_to_same_kind_and_is_never_longer(spec in 0..SPECS.len(), choices in prop::collection::vec(any::<u16>(), 1..40)) {
        let m = model(spec);
        let found = walk(&m, &choices);
        // Walks that end without a violation are not cases (proptest fails if most are not).
        prop_assume!(found.is_some());
        if let Some((kind, path)) = found {
            prop_assert_eq!(first_reach(&m, &path, kind), Some(path.len()));
            let min = minimize(&m, &path, kind);
            prop_assert!(raised_by(&m, &min, kind).is_some(), "minimized trace {:?} does not reach {}", min, kind);
            prop_assert!(min.len() <= path.len());
            if min.len() == path.len() {
                prop_assert!(context_switches(&m, &min) <= context_switches(&m, &path));
            }
        }
    }
}

#[test]
fn bystanders_are_dropped_and_steps_grouped() {
    let m = model(1);
    // Threads a#0, a#1, idle#0, idle#1 = 0..4, interleaved on purpose with idle work.
    let path = [2, 0, 3, 0, 1, 2, 1].map(Action::Thread).to_vec();
    let kind = ViolationKind::OverArrival;
    assert_eq!(first_reach(&m, &path, kind), Some(path.len()));
    let min = minimize(&m, &path, kind);
    assert!(raised_by(&m, &min, kind).is_some());
    assert!(
        !min.iter().any(|a| matches!(a, Action::Thread(2) | Action::Thread(3))),
        "idle threads dropped: {min:?}"
    );
    assert_eq!(min.len(), 4, "{min:?}");
    assert_eq!(context_switches(&m, &min), 1, "{min:?}");
}
