//! The loom models: eighteen small protocols (`specs/*.phase` of this crate), one or more per
//! hardware object, run by the reference runtime under loom, which explores their interleavings
//! under the C11 memory model. Each is its own test.
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
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p
//! phasecheck-runtime loom`. Preemption bounds (2, or 3 for token_wait, whose all-polls-succeed
//! outcome needs three, and 1 for named_barrier, whose four threads reach both outcomes at 1; `LOOM_MAX_PREEMPTIONS`
//! overrides all) keep the suite within minutes on two cores; each bound is the smallest at which
//! loom reaches every allowed outcome, so a bound too small fails the equality instead of hiding.
#![cfg(loom)]

use phasecheck_model::program::ir::Protocol;
use phasecheck_model::rt::Model;
use phasecheck_runtime::{run, Fault, Options};
use phasecheck_verifier::outcomes::{allowed_outcomes, Outcome};
use std::collections::BTreeSet;
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

#[test]
fn loom_arrive_twice() {
    model_equals_loom("arrive_twice", 2);
}

#[test]
fn loom_completion_race() {
    model_equals_loom("completion_race", 2);
}

#[test]
fn loom_named_barrier() {
    model_equals_loom("named_barrier", 1);
}

#[test]
fn loom_cluster_remote_arrive() {
    model_equals_loom("cluster_remote_arrive", 2);
}

#[test]
fn loom_elect_commit() {
    model_equals_loom("elect_commit", 2);
}

#[test]
fn loom_cp_async_arrive() {
    model_equals_loom("cp_async_arrive", 2);
}

#[test]
fn loom_partial_copies() {
    model_equals_loom("partial_copies", 2);
}

#[test]
fn loom_async_proxy() {
    model_equals_loom("async_proxy", 2);
}

#[test]
fn loom_syncwarp_mask() {
    model_equals_loom("syncwarp_mask", 2);
}

#[test]
fn loom_complete_tx_race() {
    model_equals_loom("complete_tx_race", 2);
}

/// The planted bugs of the mutation table, each with the model that should catch it and what
/// it breaks.
const MUTANTS: [(Fault, &str, &str); 13] = [
    (
        Fault::FlipBeforeCompletion,
        "completion_rotate",
        "the phase advances before the completion function runs",
    ),
    (Fault::RelaxedArrive, "split_arrive_wait", "arrivals are relaxed, not release"),
    (
        Fault::NoCompletingGuard,
        "arrive_twice",
        "arrivals do not wait out the completion step",
    ),
    (Fault::RelaxedAdvance, "completion_rotate", "the phase change is a relaxed store"),
    (Fault::RelaxedWait, "split_arrive_wait", "waits test the phase with a relaxed load"),
    (Fault::TryWaitNeverSucceeds, "try_wait_polling", "try_wait never succeeds"),
    (
        Fault::LostWakeup,
        "parity_ring",
        "the phase change notifies without the waiters' mutex",
    ),
    (
        Fault::DropIgnored,
        "drop_on_exit",
        "arrive_and_drop does not lower later phases' count",
    ),
    (Fault::CompletionSkipped, "completion_rotate", "the completion function is skipped"),
    (Fault::CommitPerLane, "elect_commit", "commit arrives once per converged lane"),
    (
        Fault::NamedCountsOneThread,
        "named_barrier",
        "a warp counts one thread at a named barrier",
    ),
    (
        Fault::ArriveOnBeforeCopies,
        "cp_async_arrive",
        "a cp.async arrive-on fires before its copies land",
    ),
    (
        Fault::ProxyRetiresEarly,
        "async_proxy",
        "wait_group returns before the async proxy's read",
    ),
];

/// Loom and the model on `name` with `fault` planted; panics (the test fails) when any check
/// fails.
fn model_equals_loom_with(name: &str, fault: Fault, preemptions: usize) {
    let proto = load(name);
    let allowed = allowed_outcomes(&Model::new(proto.clone()), 1_000_000);
    let model: BTreeSet<Outcome> = allowed.iter().cloned().collect();
    let (reached, _) = explore(name, fault, preemptions);
    assert!(
        reached == model,
        "{name}: loom and the model disagree\n  loom: {reached:?}\n  model: {model:?}"
    );
}

/// Not a test of its own: the mutation table runs it in a child process, one planted bug each
/// (a bug that deadlocks loom, or aborts, then fails that child only).
#[test]
fn loom_mutant_probe() {
    let Ok(which) = std::env::var("PHASECHECK_LOOM_MUTANT") else {
        return;
    };
    let (fault, name, _) = MUTANTS[which.parse::<usize>().expect("an index")];
    model_equals_loom_with(name, fault, 2);
}

/// Which check caught a planted bug, from the child's output; `None` for an unrelated failure.
fn caught_by(out: &str) -> Option<&'static str> {
    [
        ("Causality violation", "loom: unordered access to a buffer or var"),
        ("deadlock", "loom: deadlock"),
        ("laws broken", "audit: a barrier law broken"),
        ("undefined behaviour", "undefined behaviour the model does not allow"),
        ("did not finish", "a thread did not finish"),
        ("stale reads", "a read saw another version than the protocol means"),
        ("disagree", "outcome sets differ from the model's"),
    ]
    .into_iter()
    .find(|(k, _)| out.contains(k))
    .map(|(_, v)| v)
}

const TABLE_START: &str = "<!-- mutation table: written by loom_mutation_table_every_planted_bug_is_caught -->";
const TABLE_END: &str = "<!-- end of mutation table -->";

/// The runtime's mutation table: every planted bug is caught by a check (not an unrelated
/// panic), and docs/runtime.md shows exactly this table (`PHASECHECK_BLESS=1` rewrites it).
#[test]
fn loom_mutation_table_every_planted_bug_is_caught() {
    let exe = std::env::current_exe().expect("the test binary");
    let mut rows = vec![
        "| planted bug (`Fault`) | what it breaks | loom model | caught by |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    for (i, (fault, name, what)) in MUTANTS.iter().enumerate() {
        let out = std::process::Command::new(&exe)
            .args(["--exact", "loom_mutant_probe", "--nocapture", "--test-threads", "1"])
            .env("PHASECHECK_LOOM_MUTANT", i.to_string())
            .output()
            .expect("run the probe");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "{fault:?} went unnoticed on {name}:\n{text}");
        let how = caught_by(&text).unwrap_or_else(|| panic!("{fault:?} failed {name} for another reason:\n{text}"));
        eprintln!("{fault:?} on {name}: caught ({how})");
        rows.push(format!("| `{fault:?}` | {what} | `{name}` | {how} |"));
    }
    let table = format!("{TABLE_START}\n{}\n{TABLE_END}", rows.join("\n"));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/runtime.md");
    let doc = std::fs::read_to_string(&path).expect("docs/runtime.md");
    let (a, b) = (doc.find(TABLE_START), doc.find(TABLE_END));
    let current = match (a, b) {
        (Some(a), Some(b)) => &doc[a..b + TABLE_END.len()],
        _ => "",
    };
    if std::env::var("PHASECHECK_BLESS").is_ok_and(|v| v == "1") && !current.is_empty() {
        std::fs::write(&path, doc.replace(current, &table)).expect("write docs/runtime.md");
        return;
    }
    assert_eq!(
        current, table,
        "docs/runtime.md's mutation table is stale (PHASECHECK_BLESS=1 rewrites it)"
    );
}
