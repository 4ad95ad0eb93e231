//! The outcome enumeration and forced outcomes on small protocols, and a random-execution law.

use super::*;
use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::ViolationKind;
use proptest::prelude::*;
use std::sync::OnceLock;

fn model(src: &str) -> Model {
    let ast = lang::parse(src).unwrap_or_else(|d| panic!("parse: {}", d.render("t.phase", src)));
    lang::check(&ast).unwrap_or_else(|d| panic!("check: {}", d.render("t.phase", src)));
    Model::new(lower(&ast, &[]).unwrap_or_else(|d| panic!("lower: {}", d.render("t.phase", src))))
}

fn th(finished: bool, reads: &[i64], try_waits: &[bool], token_parities: &[u8]) -> ThreadOutcome {
    ThreadOutcome {
        finished,
        reads: reads.to_vec(),
        try_waits: try_waits.to_vec(),
        token_parities: token_parities.to_vec(),
    }
}

fn oc(threads: Vec<ThreadOutcome>, completions: &[u32]) -> Outcome {
    Outcome {
        threads,
        completions: completions.to_vec(),
        fault: false,
    }
}

/// The set's outcomes without their end probes (most tests are about the observations).
fn plain(set: &AllowedSet) -> Vec<Outcome> {
    set.iter().map(strip).collect()
}

fn strip(o: &Outcome) -> Outcome {
    o.clone()
}

const LIMIT: usize = 2_000_000;

/// The LANGUAGE.md example, as the library holds it.
const DOUBLE_BUFFER: &str = include_str!("../../../specs/guide/double_buffer.phase");

const POLL: &str = r#"
protocol poll
barrier b count 1
role producer[1] { arrive(b) }
role consumer[1] {
  let ok = try_wait_parity(b, 0)
  if ok == 0 { wait_parity(b, 0) }
}
"#;

const DEADLOCK: &str = r#"
protocol stuck
barrier b count 2
role waiter[1] {
  arrive(b)
  wait_parity(b, 0)
}
"#;

/// The waiter hangs; its timeout releases the syncthreads, and the late arrival comes too late.
const CASCADE: &str = r#"
protocol cascade
barrier b count 1
role waiter[1] { wait_parity(b, 0) }
role late[1] {
  syncthreads
  arrive(b)
}
"#;

const WRONG_PARITY: &str = r#"
protocol wrong_parity
barrier full count 1
buffer slot bytes 256
role producer[1] {
  arrive_expect_tx(full, 256)
  copy_async(slot, full, version = 7)
  wait_parity(full, 0)
}
role consumer[1] {
  wait_parity(full, 1)
  read(slot, expect = 7)
}
"#;

const COMPLETION: &str = r#"
protocol counting
var n = 0
barrier b count 2 completion tick
barrier plain count 2
completion tick { n = n + 1 }
role w[2] {
  for i in 0..3 { arrive_and_wait(b) }
  arrive_and_wait(plain)
}
"#;

const OVER_ARRIVAL: &str = r#"
protocol over
barrier b count 1
role w[1] {
  let t = arrive(b)
  wait(b, t)
  arrive(b, 2)
}
"#;

const EXIT_IN_FLIGHT: &str = r#"
protocol exit_in_flight
barrier full count 1
buffer slot bytes 64
role producer[1] {
  arrive_expect_tx(full, 64)
  copy_async(slot, full, version = 3)
}
"#;

#[test]
fn double_buffer_has_exactly_one_outcome() {
    let m = model(DOUBLE_BUFFER);
    let set = allowed_outcomes(&m, LIMIT);
    assert!(set.is_complete());
    let consumer = th(true, &[0, 1, 2, 3], &[], &[0, 0, 1, 1]);
    let want = oc(vec![th(true, &[], &[], &[0, 0, 1, 1]), consumer.clone(), consumer], &[0, 0, 0, 0]);
    assert_eq!(plain(&set), vec![want.clone()], "{set}");
    assert!(!set.fault_allowed());
    assert!(set.contains(&want));
    let mut stale = want.clone();
    stale.threads[1].reads[2] = 0;
    assert!(!set.contains(&stale));
    let mut hung = want.clone();
    hung.threads[2].finished = false;
    assert!(!set.contains(&hung));
    let mut faulted = want;
    faulted.fault = true;
    assert!(!set.contains(&faulted));
    assert_eq!(set.summary(), "1 outcome");
}

#[test]
fn the_end_probes_are_predicted_and_judged() {
    let m = model(DOUBLE_BUFFER);
    let set = allowed_outcomes(&m, LIMIT);
    let o = set.iter().next().unwrap().clone();
    // Every barrier of the double buffer completes two phases: phase 2 is in progress.
    let ends = set.ends_of(&o);
    assert_eq!(ends.len(), 1);
    let end = ends[0].clone();
    assert_eq!(end.parity, vec![PROBE_PARITY_0; 4]);
    let line = format!("{o}{}", end.suffix());
    assert!(line.ends_with("phases=[0,0,0,0]"), "{line}");
    assert_eq!(Outcome::parse_observed(&line, 4).unwrap(), (o.clone(), end.clone()));
    assert_eq!(set.judge_end(&o, &end), Judged::Constrained);
    let mut wrong = end.clone();
    wrong.parity[2] = PROBE_PARITY_1;
    assert_eq!(set.judge_end(&o, &wrong), Judged::Rejected);
    wrong.parity[2] = PROBE_BOTH;
    assert_eq!(set.judge_end(&o, &wrong), Judged::Rejected);
    // Not probed by the backend: a wildcard; not recorded at all: ignored.
    wrong.parity[2] = PROBE_NONE;
    assert_eq!(set.judge_end(&o, &wrong), Judged::Constrained);
    assert_eq!(set.judge_end(&o, &End::default()), Judged::Constrained);
    // A trace that runs to the end forces the same end.
    let f = forced(&m, &one_run(&m)).unwrap();
    assert_eq!(f.end, Some(end));
}

/// One execution to its end, the first enabled action each time.
fn one_run(m: &Model) -> Vec<Action> {
    let (mut r, _) = Replay::start(m);
    let mut acts = Vec::new();
    while let Some(s) = r.state() {
        if s.all_done() {
            break;
        }
        let a = r.enabled()[0];
        let step = r.take(a).expect("an enabled action replays");
        assert!(step.outcome.next.is_some(), "the run ended at step {}", acts.len() + 1);
        acts.push(a);
    }
    acts
}

#[test]
fn try_wait_may_see_either_result() {
    let set = allowed_outcomes(&model(POLL), LIMIT);
    let got: Vec<Outcome> = plain(&set);
    let want: Vec<Outcome> = [false, true]
        .into_iter()
        .map(|r| oc(vec![th(true, &[], &[], &[0]), th(true, &[], &[r], &[])], &[0]))
        .collect();
    assert_eq!(got, want, "{set}");
    assert_eq!(set.summary(), "2 outcomes");
}

#[test]
fn a_deadlocked_thread_hangs() {
    let m = model(DEADLOCK);
    let set = allowed_outcomes(&m, LIMIT);
    let want = oc(vec![th(false, &[], &[], &[0])], &[0]);
    assert_eq!(plain(&set), vec![want.clone()], "{set}");
    let f = forced(&m, &[Action::Thread(0)]).unwrap();
    assert_eq!(strip(&f.outcome), want);
    assert_eq!(f.ends, vec![ThreadEnd::Hung]);
    assert_eq!(f.timeouts, vec![0]);
}

#[test]
fn a_timeout_releases_syncthreads_but_rescues_no_waiter() {
    let m = model(CASCADE);
    let set = allowed_outcomes(&m, LIMIT);
    let want = oc(vec![th(false, &[], &[], &[]), th(true, &[], &[], &[0])], &[0]);
    assert_eq!(plain(&set), vec![want.clone()], "{set}");
    // Once the late thread is at syncthreads, the CTA is quiet.
    let f = forced(&m, &[Action::Thread(1)]).unwrap();
    assert_eq!(strip(&f.outcome), want);
    assert_eq!(f.ends, vec![ThreadEnd::Hung, ThreadEnd::Finished]);
}

#[test]
fn wrong_parity_consumer_may_read_stale_torn_or_new_or_hang() {
    let m = model(WRONG_PARITY);
    let set = allowed_outcomes(&m, LIMIT);
    assert!(set.is_complete());
    // Either the wait returns at once (parity 1 names the phase before phase 0) and the read
    // races with the copy, or phase 0 has already completed and parity 1 now names phase 1,
    // which never completes: the consumer hangs (GPU.md saw both).
    let producer = th(true, &[], &[], &[0]);
    let want: Vec<Outcome> = [
        th(false, &[], &[], &[]),
        th(true, &[-1], &[], &[]),
        th(true, &[0], &[], &[]),
        th(true, &[7], &[], &[]),
    ]
    .into_iter()
    .map(|c| oc(vec![producer.clone(), c], &[0]))
    .collect();
    assert_eq!(plain(&set), want, "{set}");
    assert!(!set.fault_allowed());
    let bad = oc(vec![th(true, &[], &[], &[0]), th(true, &[3], &[], &[])], &[0]);
    assert!(!set.contains(&bad));
}

#[test]
fn what_completion_functions_compute_is_part_of_the_outcome() {
    let m = model(COMPLETION);
    assert_eq!(completion_vars(&m.proto), vec![0]);
    let set = allowed_outcomes(&m, LIMIT);
    let o = set.iter().next().unwrap();
    let end = set.ends_of(o)[0].clone();
    assert_eq!(end.vars, vec![3]);
    assert!(end.suffix().contains("vars=[3]"));
    let lost = End {
        vars: vec![2],
        ..end.clone()
    };
    assert_eq!(set.judge_end(o, &lost), Judged::Rejected);
    assert_eq!(set.judge_end(o, &end), Judged::Constrained);
}

#[test]
fn completion_runs_are_counted_per_barrier() {
    let set = allowed_outcomes(&model(COMPLETION), LIMIT);
    let want = oc(vec![th(true, &[], &[], &[]), th(true, &[], &[], &[])], &[3, 0]);
    assert_eq!(plain(&set), vec![want], "{set}");
}

#[test]
fn undefined_behaviour_admits_anything_after_the_prefix() {
    let m = model(OVER_ARRIVAL);
    let set = allowed_outcomes(&m, LIMIT);
    assert_eq!(set.len(), 0, "{set}");
    let u: Vec<&Undefined> = set.undefined().collect();
    assert_eq!(u.len(), 1);
    assert_eq!(u[0].cause, ViolationKind::OverArrival);
    assert_eq!(u[0].prefix.threads[0].token_parities, vec![0]);
    assert!(set.fault_allowed());
    // Anything after the first token, finished or not, faulted or not.
    assert!(set.contains(&oc(vec![th(true, &[], &[], &[0, 1])], &[0])));
    assert!(set.contains(&oc(vec![th(false, &[], &[], &[0])], &[0])));
    assert!(set.contains(&Outcome {
        fault: true,
        ..Outcome::default()
    }));
    // ... but not a first token of the wrong parity.
    assert!(!set.contains(&oc(vec![th(true, &[], &[], &[1])], &[0])));
    assert!(set.summary().contains("over-arrival"), "{}", set.summary());
    let f = forced(&m, &[Action::Thread(0), Action::Thread(0), Action::Thread(0)]).unwrap();
    assert_eq!(f.undefined, Some(ViolationKind::OverArrival));
    assert!(set.contains(&f.outcome));
}

#[test]
fn exiting_with_a_copy_in_flight_allows_a_fault() {
    let set = allowed_outcomes(&model(EXIT_IN_FLIGHT), LIMIT);
    assert!(set.undefined().any(|u| u.cause == ViolationKind::Lifetime), "{set}");
    let faulted = Outcome {
        threads: vec![th(false, &[], &[], &[0])],
        completions: vec![0],
        fault: true,
    };
    assert!(set.contains(&faulted));
}

#[test]
fn a_trace_that_stops_early_marks_runnable_threads_finished() {
    let m = model(POLL);
    let f = forced(&m, &[Action::Thread(1)]).unwrap();
    assert_eq!(f.ends, vec![ThreadEnd::Running, ThreadEnd::Blocked]);
    assert_eq!(f.outcome.threads[1].try_waits, vec![false]);
    assert!(f.outcome.threads[0].finished && !f.outcome.threads[1].finished);
    assert!(forced(&m, &[Action::Land(0)]).is_err());
}

#[test]
fn the_limit_makes_the_set_incomplete() {
    let set = allowed_outcomes(&model(DOUBLE_BUFFER), 10);
    assert!(!set.is_complete());
    assert!(set.summary().contains("incomplete"));
}

#[test]
fn outcomes_round_trip_through_json() {
    let set = allowed_outcomes(&model(WRONG_PARITY), LIMIT);
    let json = serde_json::to_string(&set).unwrap();
    let back: AllowedSet = serde_json::from_str(&json).unwrap();
    assert_eq!(back, set);
}

const SPECS: [&str; 9] = [
    DOUBLE_BUFFER,
    POLL,
    DEADLOCK,
    CASCADE,
    WRONG_PARITY,
    COMPLETION,
    OVER_ARRIVAL,
    EXIT_IN_FLIGHT,
    r#"
protocol mixed
barrier b count 2
barrier c count 1
buffer x bytes 16
role a[1] {
  write(x, 1)
  let t = arrive(b)
  let ok = try_wait(b, t)
  syncthreads
  read(x)
}
role z[1] {
  read(x)
  syncthreads
  let u = arrive(c)
  arrive(b)
  wait(c, u)
}
"#,
];

fn models() -> &'static Vec<(Model, AllowedSet)> {
    static M: OnceLock<Vec<(Model, AllowedSet)>> = OnceLock::new();
    M.get_or_init(|| {
        SPECS
            .iter()
            .map(|src| {
                let m = model(src);
                let set = allowed_outcomes(&m, LIMIT);
                assert!(set.is_complete());
                (m, set)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn every_random_execution_outcome_is_allowed(spec in 0..SPECS.len(), choices in prop::collection::vec(any::<u32>(), 64)) {
        let (m, set) = &models()[spec];
        let mut trace = Vec::new();
        let (mut r, _) = Replay::start(m);
        for k in 0.. {
            match r.state() {
                Some(s) if !s.all_done() && !r.enabled().is_empty() => {}
                _ => break,
            }
            let a = r.enabled()[choices[k % choices.len()] as usize % r.enabled().len()];
            r.take(a).expect("an enabled action replays");
            trace.push(a);
        }
        let o = forced_outcome(m, &trace);
        prop_assert!(set.contains(&o), "{o}\nnot in\n{set}\ntrace {trace:?}");
    }
}

#[test]
fn a_trace_that_does_not_replay_is_refused_with_its_step_and_thread() {
    let m = model(DEADLOCK);
    let e = forced(&m, &[Action::Thread(0), Action::Thread(0), Action::Thread(0)]).unwrap_err();
    assert_eq!(e, "step 2 cannot be taken: waiter#0 is blocked");
    let e = prefix_observations(&m, &[Action::Land(3)]).unwrap_err();
    assert_eq!(e, "step 1 cannot be taken: there is no async copy #3 in flight (0 are)");
}

/// Whatever budget stops the enumeration, the part explored holds only outcomes (and undefined
/// behaviour patterns) of the whole set, and it never rejects: so a GPU run judged against it can
/// be unchecked, never a false OUTSIDE.
#[test]
fn an_incomplete_set_is_a_subset_of_the_whole_and_never_rejects() {
    let mut partial = 0;
    for (m, whole) in models() {
        for limit in [2, 5, 10, 20, 50, 100, 300] {
            let part = allowed_outcomes(m, limit);
            if part.is_complete() {
                assert_eq!(&part.outcomes, &whole.outcomes);
                continue;
            }
            partial += usize::from(!part.is_empty() && part.len() < whole.len());
            assert!(
                part.outcomes.is_subset(&whole.outcomes),
                "limit {limit}:\n{part}\nnot within\n{whole}"
            );
            assert!(part.undefined.is_subset(&whole.undefined), "limit {limit}");
            for o in whole.iter().chain(part.iter()) {
                let j = part.judge(o);
                assert_ne!(j, Judged::Rejected, "limit {limit}: {o}");
                if j == Judged::Constrained {
                    assert_eq!(whole.judge(o), Judged::Constrained, "{o}");
                }
            }
        }
    }
    assert!(partial > 0, "no budget left a proper, non-empty part");
}

/// A CTA of a cluster that exits (or whose last thread times out) with a copy still in flight
/// into its shared memory ends the execution there as undefined behaviour, as `check` reports
/// it: before, only a peer's later remote step into the exited CTA did, so a run that faulted at
/// the exit itself (the reference runtime, 1 call in 30 of fuzz/findings/run-cpu-cluster-hang-
/// then-lifetime) was outside the model.
#[test]
fn a_cluster_cta_exiting_under_its_copy_in_flight_is_undefined_from_that_exit() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/findings/run-cpu-cluster-hang-then-lifetime.phase"
    ))
    .unwrap();
    let set = allowed_outcomes(&model(&src), 1_000_000);
    let prefixes: Vec<Vec<Vec<u8>>> = set
        .undefined()
        .map(|u| {
            assert_eq!(u.cause, ViolationKind::Lifetime);
            u.prefix.threads.iter().map(|t| t.token_parities.clone()).collect()
        })
        .collect();
    // cta1.producer arrived and exited under its copies; cta0.producer had not arrived yet.
    assert!(prefixes.contains(&vec![vec![], vec![], vec![0], vec![]]), "{prefixes:?}");
    assert!(prefixes.contains(&vec![vec![0], vec![], vec![], vec![]]), "{prefixes:?}");
    assert_eq!(
        set.summary(),
        "0 outcomes + 3 undefined-behaviour prefixes (lifetime), fault allowed"
    );
}
