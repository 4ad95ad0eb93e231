//! The runtime detects the undefined behaviour of SEMANTICS.md itself, with the model's kind names,
//! and keeps the counting laws on OS threads.
#![cfg(not(loom))]

use phasecheck_model::ViolationKind as K;
use phasecheck_runtime::barrier::{unbounded, Barrier, Fault, WaitError};

fn none() -> impl FnMut(u64) -> Result<(), phasecheck_runtime::Ub> {
    |_| Ok(())
}

fn kind(r: Result<impl std::fmt::Debug, WaitError>) -> K {
    match r {
        Err(WaitError::Ub(u)) => u.kind,
        other => panic!("expected undefined behaviour, got {other:?}"),
    }
}

#[test]
fn over_arrival_is_detected_before_the_word_changes() {
    let b = Barrier::new("b", Some(2), Fault::None).unwrap();
    assert_eq!(kind(b.arrive(3, None, false, &mut none(), &unbounded())), K::OverArrival);
    // Nothing changed: two arrivals still complete phase 0.
    assert_eq!(b.arrive(1, None, false, &mut none(), &unbounded()).unwrap(), 0);
    assert_eq!(b.arrive(1, None, false, &mut none(), &unbounded()).unwrap(), 0);
    assert_eq!(b.phase(), 1);
    assert!(b.audit().laws("b").is_empty());
}

#[test]
fn count_range_at_init_and_on_a_drop_to_zero() {
    assert_eq!(Barrier::new("b", Some(0), Fault::None).unwrap_err().kind, K::CountRange);
    assert_eq!(Barrier::new("b", Some(1 << 20), Fault::None).unwrap_err().kind, K::CountRange);
    let b = Barrier::new("b", Some(1), Fault::None).unwrap();
    assert_eq!(kind(b.arrive(1, None, true, &mut none(), &unbounded())), K::CountRange);
}

#[test]
fn tx_range_on_a_single_expect_and_on_the_running_count() {
    let b = Barrier::new("b", Some(1), Fault::None).unwrap();
    assert_eq!(kind(b.expect_tx(-1, &mut none(), &unbounded())), K::TxRange);
    b.expect_tx((1 << 20) - 1, &mut none(), &unbounded()).unwrap();
    assert_eq!(kind(b.expect_tx(1, &mut none(), &unbounded())), K::TxRange);
}

#[test]
fn a_transient_negative_tx_count_is_legal_and_completes_once() {
    let b = Barrier::new("b", Some(1), Fault::None).unwrap();
    let runs = std::cell::Cell::new(0);
    let mut count = |_p: u64| {
        runs.set(runs.get() + 1);
        Ok(())
    };
    b.complete_tx(64, &mut count, &unbounded()).unwrap(); // the copy landed first: tx = -64
    b.arrive(1, None, false, &mut count, &unbounded()).unwrap(); // pending 0, tx -64: not complete
    assert_eq!(b.phase(), 0);
    assert_eq!(runs.get(), 0);
    // tx back to zero with every arrival in: the expect completes the phase (SEMANTICS.md: a
    // phase completes when both counts are zero, whichever operation gets them there).
    b.expect_tx(64, &mut count, &unbounded()).unwrap();
    assert_eq!(b.phase(), 1);
    assert_eq!(runs.get(), 1);
    assert!(b.audit().laws("b").is_empty());
}

#[test]
fn uninitialized_use_reinit_and_use_after_inval() {
    let b = Barrier::new("b", None, Fault::None).unwrap();
    assert_eq!(kind(b.arrive(1, None, false, &mut none(), &unbounded())), K::Uninitialized);
    b.init(1).unwrap();
    assert_eq!(b.init(1).unwrap_err().kind, K::Uninitialized);
    b.inval().unwrap();
    assert_eq!(b.try_wait_parity(0).unwrap_err().kind, K::Uninitialized);
    b.init(2).unwrap();
    assert_eq!(b.arrive(1, None, false, &mut none(), &unbounded()).unwrap(), 0);
}

#[test]
fn a_drop_lowers_later_phases_only() {
    let b = Barrier::new("b", Some(2), Fault::None).unwrap();
    b.arrive(1, None, true, &mut none(), &unbounded()).unwrap();
    assert_eq!(b.phase(), 0, "phase 0 still needs its second arrival");
    b.arrive(1, None, false, &mut none(), &unbounded()).unwrap();
    assert_eq!(b.phase(), 1);
    b.arrive(1, None, false, &mut none(), &unbounded()).unwrap();
    assert_eq!(b.phase(), 2, "phase 1 expects one arrival");
    assert!(b.audit().laws("b").is_empty(), "{:?}", b.audit().laws("b"));
}

#[test]
fn a_wait_on_a_future_phase_times_out_instead_of_hanging() {
    let b = Barrier::new("b", Some(1), Fault::None).unwrap();
    let bound = phasecheck_runtime::barrier::Bound {
        deadline: Some(std::time::Instant::now() + std::time::Duration::from_millis(20)),
        cancelled: &|| false,
    };
    assert_eq!(b.wait_parity(0, &bound), Err(WaitError::TimedOut));
    assert!(b.try_wait_parity(1).unwrap(), "the phase before 0 counts as complete");
}

#[test]
fn the_audit_sees_a_phase_advanced_before_its_completion_ran() {
    let b = Barrier::new("b", Some(1), Fault::FlipBeforeCompletion).unwrap();
    b.arrive(1, None, false, &mut none(), &unbounded()).unwrap();
    let laws = b.audit().laws("b");
    assert!(laws.iter().any(|l| l.contains("advanced after 0 completion step")), "{laws:?}");
}

#[test]
fn a_drop_whose_arrival_is_refused_leaves_the_expected_count_alone() {
    // Found by the differential suite: the drop was applied before the over-arrival was refused.
    let b = Barrier::new("b", Some(2), Fault::None).unwrap();
    b.arrive(2, Some(16), false, &mut none(), &unbounded()).unwrap(); // all in, 16 bytes pending
    assert_eq!(kind(b.arrive(1, None, true, &mut none(), &unbounded())), K::OverArrival);
    b.complete_tx(16, &mut none(), &unbounded()).unwrap();
    assert_eq!(b.phase(), 1);
    assert!(b.audit().laws("b").is_empty(), "{:?}", b.audit().laws("b"));
    b.arrive(1, None, false, &mut none(), &unbounded()).unwrap();
    assert_eq!(b.phase(), 1, "phase 1 still expects two arrivals");
}
