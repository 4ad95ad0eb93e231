//! The loom models: eight small protocols (`specs/*.phase` of this crate) run by the reference
//! runtime under loom, which explores their interleavings under the C11 memory model.
//!
//! On every execution loom explores, the run must:
//! * stop on no undefined behaviour and end with every thread finished (a lost wake-up is a
//!   deadlock loom itself reports; a thread that cannot finish fails the outcome check);
//! * keep the barrier's laws, checked by its audit log: each phase completes with exactly the
//!   arrivals it expected and runs its completion step exactly once before it advances; a wait
//!   returns only after the phase it named completed; a drop lowers the expected count of later
//!   phases only (phase p starts with the initial count minus the drops made on phases before p);
//! * touch buffers and vars only when ordered by happens-before (they are loom `UnsafeCell`s:
//!   loom panics on an unordered access, so a barrier that fails to publish is caught).
//!
//! And over all executions, the set of outcomes loom reaches must EQUAL the set the model allows
//! for the same spec (`phasecheck_verifier::outcomes::allowed_outcomes`): every outcome loom finds is
//! allowed, and every allowed outcome is reached.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --workspace loom`. Preemption bounds (2,
//! or 3 for token_wait, whose all-polls-succeed outcome needs three; `LOOM_MAX_PREEMPTIONS`
//! overrides all) keep the suite within minutes on two cores; each bound is the smallest at which
//! loom reaches every allowed outcome, so a bound too small fails the equality instead of hiding.
#![cfg(loom)]

use phasecheck_model::program::ir::Protocol;
use phasecheck_model::rt::Model;
use phasecheck_runtime::{run, Fault, Options};
use phasecheck_verifier::outcomes::{allowed_outcomes, Outcome};
use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

fn load(name: &str) -> Protocol {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs").join(format!("{name}.phase"));
    phasecheck_model::spec::load(&path, &[]).unwrap_or_else(|e| panic!("{e}")).proto
}

/// The preemption bound of a model: its own (the smallest at which loom reaches every outcome
/// the model allows, so the equality check is meaningful), unless `LOOM_MAX_PREEMPTIONS` says.
fn bound(own: usize) -> usize {
    std::env::var("LOOM_MAX_PREEMPTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(own)
}

/// The laws checked at the end of each execution, from the barriers' audit logs.
fn check_laws(r: &phasecheck_runtime::RunResult) {
    assert!(r.ub.is_none(), "undefined behaviour: {:?}", r.ub);
    assert!(r.broken.is_empty(), "laws broken: {:?}", r.broken);
    assert!(r.stale_reads.is_empty(), "stale reads: {:?}", r.stale_reads);
    assert!(
        r.outcome.threads.iter().all(|t| t.finished),
        "a thread did not finish: {}",
        r.outcome
    );
}

/// Explore `spec` under loom; return the outcomes reached and the executions explored.
fn explore(name: &str, fault: Fault, preemptions: usize) -> (BTreeSet<Outcome>, usize) {
    let proto = Arc::new(load(name));
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let runs = Arc::new(Mutex::new(0usize));
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound(preemptions));
    let (p, s, n) = (proto.clone(), seen.clone(), runs.clone());
    b.check(move || {
        let opts = Options {
            fault,
            ..Options::default()
        };
        let r = run(&p, &opts).expect("supported");
        check_laws(&r);
        s.lock().unwrap().insert(r.outcome);
        *n.lock().unwrap() += 1;
    });
    let out = seen.lock().unwrap().clone();
    let n = *runs.lock().unwrap();
    (out, n)
}

/// The whole check for one model: loom's outcome set equals the model's allowed set.
fn model_equals_loom(name: &str, preemptions: usize) {
    let t = Instant::now();
    let proto = load(name);
    let allowed = allowed_outcomes(&Model::new(proto.clone()), 1_000_000);
    assert!(allowed.is_complete(), "{name}: the model's enumeration did not finish");
    assert!(
        allowed.undefined().next().is_none(),
        "{name}: the model allows undefined behaviour:\n{allowed}"
    );
    let model: BTreeSet<Outcome> = allowed.iter().cloned().collect();
    let (reached, executions) = explore(name, Fault::None, preemptions);
    let extra: Vec<String> = reached.difference(&model).map(|o| o.to_string()).collect();
    let missing: Vec<String> = model.difference(&reached).map(|o| o.to_string()).collect();
    eprintln!(
        "loom model {name}: {executions} executions, {} outcome(s), preemption bound {}, {:.1} s",
        reached.len(),
        bound(preemptions),
        t.elapsed().as_secs_f64()
    );
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{name}: loom and the model disagree\n  reached by loom, not allowed by the model: {extra:?}\n  allowed by the model, not reached by loom: {missing:?}"
    );
}

#[test]
fn loom_double_buffer() {
    model_equals_loom("double_buffer", 2);
}

#[test]
fn loom_parity_ring() {
    model_equals_loom("parity_ring", 2);
}

#[test]
fn loom_drop_on_exit() {
    model_equals_loom("drop_on_exit", 2);
}

#[test]
fn loom_completion_rotate() {
    model_equals_loom("completion_rotate", 2);
}

#[test]
fn loom_split_arrive_wait() {
    model_equals_loom("split_arrive_wait", 2);
}

#[test]
fn loom_tx_transient_negative() {
    model_equals_loom("tx_transient_negative", 2);
}

#[test]
fn loom_try_wait_polling() {
    model_equals_loom("try_wait_polling", 2);
}

#[test]
fn loom_token_wait() {
    model_equals_loom("token_wait", 3);
}

/// Runs a faulty runtime under loom and returns the failure message; panics if loom (with the
/// laws above) finds nothing wrong.
fn caught(name: &str, fault: Fault) -> String {
    let r = catch_unwind(AssertUnwindSafe(|| explore(name, fault, 2)));
    match r {
        Ok((reached, n)) => panic!("{fault:?} went unnoticed on {name}: {n} executions, outcomes {reached:?}"),
        Err(e) => e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    }
}

/// The failure must be one of the checks above, not an unrelated panic: loom's race detector on
/// a buffer or var (the faulty barrier failed to order it), a broken law, or a wrong outcome.
fn assert_caught_by_a_check(what: &str, msg: &str) {
    eprintln!("{what} caught: {msg}");
    assert!(
        msg.contains("Causality violation") || msg.contains("laws broken") || msg.contains("disagree"),
        "{what} failed for another reason: {msg}"
    );
}

#[test]
fn loom_catches_phase_flip_before_completion() {
    // The waiters read `ctrl` before the completion function has written it.
    let msg = caught("completion_rotate", Fault::FlipBeforeCompletion);
    assert_caught_by_a_check("flip-before-completion", &msg);
}

#[test]
fn loom_catches_relaxed_arrive() {
    // The first arriver's write of its slot is not published to the other thread's read.
    let msg = caught("split_arrive_wait", Fault::RelaxedArrive);
    assert_caught_by_a_check("relaxed arrive", &msg);
}
