//! Judging GPU runs: the three verdicts, replay judged against its trace, litmus evidence.

use phasecheck_gpu::compare::{hang_in_model, judge_launch_hung, judge_replay, judge_stress, never_seen_reason, Verdict};
use phasecheck_gpu::report::{Case, Report};
use phasecheck_model::rt::Model;
use phasecheck_model::spec::load as load_spec;
use phasecheck_verifier::outcomes::{allowed_outcomes, forced, Outcome};
use phasecheck_verifier::{check, CheckOptions};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn model(rel: &str) -> Model {
    Model::new(load_spec(&root().join(rel), &[]).unwrap().proto)
}

fn parse(m: &Model, s: &str) -> Outcome {
    Outcome::parse(s, m.proto.barriers.len()).unwrap()
}

#[test]
fn every_observed_outcome_of_the_committed_report_parses_back_to_its_line() {
    let text = std::fs::read_to_string(root().join("gpu-conformance/results/2026-11-30-h200-after-soundness.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut n = 0;
    for c in v["cases"].as_array().unwrap() {
        let m = model(c["spec"].as_str().unwrap());
        for line in c["observed"].as_object().unwrap().keys() {
            let o = parse(&m, line);
            assert_eq!(&o.to_string(), line);
            n += 1;
        }
    }
    assert!(n > 400, "{n}");
    assert!(Outcome::parse("t0 done | t2 done", 0).is_err(), "threads out of order");
    assert!(Outcome::parse("t0 maybe", 0).is_err());
    let f = Outcome::parse("fault", 3).unwrap();
    assert!(f.fault && f.threads.is_empty());
}

#[test]
fn the_three_verdicts_of_a_stress_case() {
    // double_buffer: one outcome; a stale read is outside.
    let m = model("specs/guide/double_buffer.phase");
    let set = allowed_outcomes(&m, 1_000_000);
    let good = set.iter().next().unwrap().clone();
    let (j, lit) = judge_stress(&set, &[(good.clone(), 4096)], &[]);
    assert_eq!(j.verdict, Verdict::Within);
    assert_eq!((j.tally.constrained, j.tally.vacuous, j.tally.outside), (4096, 0, 0));
    assert_eq!(lit.never_seen_count, 0);
    let mut stale = good.clone();
    stale.threads[1].reads[2] = 0;
    let (j, _) = judge_stress(&set, &[(good, 4000), (stale, 96)], &[]);
    assert_eq!(j.verdict, Verdict::Outside);
    assert_eq!(j.tally.outside, 96);

    // uninitialized: undefined behaviour before any observation; anything is admitted, and that
    // is said, never counted as agreement.
    let m = model("specs/kinds/uninitialized.phase");
    let set = allowed_outcomes(&m, 1_000_000);
    assert!(!set.vacuous_causes().is_empty(), "{set}");
    let any = parse(&m, "t0 HUNG | t1 done");
    let (j, _) = judge_stress(&set, &[(any, 32)], &[]);
    assert_eq!(j.verdict, Verdict::Unchecked);
    assert!(
        j.why.contains("before any observation") && j.why.contains("uninitialized"),
        "{}",
        j.why
    );

    // over_arrival: the undefined behaviour comes after a recorded token: a fault is within (the
    // model allows one), a first token of the wrong parity is outside.
    let src = "protocol over\nbarrier b count 1\nrole w[1] {\n  let t = arrive(b)\n  wait(b, t)\n  arrive(b, 2)\n}\n";
    let dir = std::env::temp_dir().join(format!("pc-judging-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("over.phase"), src).unwrap();
    let m = Model::new(load_spec(&dir.join("over.phase"), &[]).unwrap().proto);
    let set = allowed_outcomes(&m, 1_000_000);
    assert!(set.vacuous_causes().is_empty());
    let fault = Outcome::parse("fault", 1).unwrap();
    assert_eq!(judge_stress(&set, &[(fault, 1)], &[]).0.verdict, Verdict::Within);
    assert_eq!(
        judge_stress(&set, &[(parse(&m, "t0 done parity=[0,1]"), 1)], &[]).0.verdict,
        Verdict::Within
    );
    assert_eq!(
        judge_stress(&set, &[(parse(&m, "t0 done parity=[1]"), 1)], &[]).0.verdict,
        Verdict::Outside
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn litmus_lists_what_was_allowed_but_never_seen_with_a_reason() {
    let m = model("gpu-conformance/tests/fixtures/wrong_parity.phase");
    let set = allowed_outcomes(&m, 1_000_000);
    assert!(set.len() >= 3, "{set}");
    let seen: Vec<Outcome> = set
        .iter()
        .filter(|o| o.threads.iter().all(|t| t.finished && !t.reads.contains(&-1)))
        .take(1)
        .cloned()
        .collect();
    let (j, lit) = judge_stress(&set, &[(seen[0].clone(), 10)], &[]);
    assert_eq!(j.verdict, Verdict::Within);
    assert_eq!(lit.allowed.len(), set.len());
    assert_eq!(lit.never_seen_count, set.len() - 1);
    assert_eq!(lit.never_seen.len(), lit.never_seen_count);
    let hung = lit
        .never_seen
        .iter()
        .find(|n| n.outcome.contains("HUNG"))
        .expect("a hang is allowed");
    assert!(hung.reason.contains("timeout/hang"), "{}", hung.reason);
    let torn = lit.never_seen.iter().find(|n| n.outcome.contains("torn"));
    if let Some(t) = torn {
        assert!(t.reason.contains("torn read"), "{}", t.reason);
    }
    // A combination of parts each seen in another block is a timing reason naming the threads
    // that never came together.
    let x = seen[0].clone();
    let (mut a, mut b, mut both) = (x.clone(), x.clone(), x.clone());
    a.threads[0].reads = vec![7];
    b.threads[1].reads = vec![8];
    both.threads[0].reads = vec![7];
    both.threads[1].reads = vec![8];
    let r = never_seen_reason(&both, &[&a, &b]);
    assert!(r.starts_with("timing:") && r.contains("never t0 with t1"), "{r}");

    // The hardware-notes section lists it.
    let case = Case {
        spec: "x.phase".into(),
        backend: "ptx".into(),
        mode: "stress".into(),
        verdict: Some(Verdict::Within),
        litmus: Some(lit),
        ..Default::default()
    };
    let r = Report {
        device: "dev".into(),
        date: "d".into(),
        cases: vec![case],
        ..Default::default()
    };
    let s = r.hardware_notes_section();
    assert!(s.contains("### x.phase") && s.contains("HUNG") && s.contains("timeout/hang"), "{s}");
}

#[test]
fn a_replay_block_is_judged_against_its_trace_then_from_where_it_left() {
    let m = model("specs/mistakes/consumer_wrong_parity.phase");
    let set = allowed_outcomes(&m, 1_000_000);
    let rep = check(&m, &CheckOptions::default());
    let v = rep.violations.iter().find(|v| v.kind.name() == "data-race").unwrap();
    let fc = forced(&m, &v.actions).unwrap();
    // Exactly the forced outcome: reproduced.
    let (j, info) = judge_replay(&m, &v.actions, &fc, &set, &[(fc.outcome.clone(), 32)], &[], 1_000_000, None);
    assert_eq!(j.verdict, Verdict::Within);
    assert_eq!((info.reproduced, info.left), (32, 0));
    // What the H200 showed: the consumer hung after two reads. Not the forced outcome; allowed
    // from a point late in the trace.
    let hung = parse(&m, "t0 done parity=[0,0,1] | t1 HUNG reads=[0,1] parity=[0,0]");
    let (j, info) = judge_replay(&m, &v.actions, &fc, &set, &[(hung.clone(), 32)], &[], 1_000_000, None);
    assert_eq!(j.verdict, Verdict::Within);
    assert_eq!((info.reproduced, info.left), (0, 32));
    let (k, n) = info.left_at.iter().next().unwrap();
    assert_eq!(*n, 32);
    // Why: the trace holds the copy in flight past where the block left; the GPU lands it at once.
    assert!(
        info.left_why.contains("in flight") && info.left_why.contains("cannot hold it back"),
        "{}",
        info.left_why
    );
    assert!(
        k.parse::<usize>().unwrap() > 0,
        "judged from a point after the start: {:?}",
        info.left_at
    );
    // Something no execution allows: outside, judged from nowhere.
    let bad = parse(&m, "t0 done parity=[1,1,1] | t1 done reads=[0,1,2] parity=[0,0]");
    let (j, info) = judge_replay(&m, &v.actions, &fc, &set, &[(bad, 1), (hung, 31)], &[], 1_000_000, None);
    assert_eq!(j.verdict, Verdict::Outside);
    assert_eq!(info.left_at.get("none"), Some(&1));
    assert_eq!(info.left_judged.outside, 1);
}

#[test]
fn a_replayed_block_must_end_in_the_phases_its_trace_fixes() {
    use phasecheck_verifier::outcomes::{End, PROBE_NONE};
    let m = model("specs/guide/double_buffer.phase");
    let set = allowed_outcomes(&m, 1_000_000);
    let acts = phasecheck_verifier::outcomes::one_execution_landings_first(&m).unwrap();
    let fc = forced(&m, &acts).unwrap();
    let end = fc.end.clone().expect("the trace runs to the end");
    assert_eq!(end.parity.len(), 4);
    let obs = [(fc.outcome.clone(), 32)];
    let (j, info) = judge_replay(&m, &acts, &fc, &set, &obs, std::slice::from_ref(&end), 1_000_000, None);
    assert_eq!((j.verdict, info.reproduced), (Verdict::Within, 32));
    // Every thread as forced, but a barrier one phase off: not reproduced, and nothing allows it.
    let mut off = end.clone();
    off.parity[0] ^= 1;
    let (j, info) = judge_replay(&m, &acts, &fc, &set, &obs, std::slice::from_ref(&off), 1_000_000, None);
    assert_eq!((info.reproduced, info.left), (0, 32));
    assert_eq!(j.verdict, Verdict::Outside);
    let (j, _) = judge_stress(&set, &obs, std::slice::from_ref(&off));
    assert_eq!(j.verdict, Verdict::Outside);
    // Not probed (a libcu++ software barrier): a wildcard; nothing recorded: ignored.
    off.parity[0] = PROBE_NONE;
    let (j, info) = judge_replay(&m, &acts, &fc, &set, &obs, &[off], 1_000_000, None);
    assert_eq!((j.verdict, info.reproduced), (Verdict::Within, 32));
    let (j, _) = judge_stress(&set, &obs, &[End::default()]);
    assert_eq!(j.verdict, Verdict::Within);
}

/// A replayed block in which a thread hung where an allowed outcome has it go on, everything else
/// as allowed, is `not forced` (the turnstile held the thread it waited for past the wait's bound:
/// the H200 showed `t1 HUNG` with the phase it waited for completed in 6 of 32 blocks of
/// `g25_split_expect_after_copy`'s libcu data-race replay): counted apart, never within. The same
/// outcome in stress (no forcing) is OUTSIDE, and a replay block that no allowed outcome explains
/// even so stays OUTSIDE.
#[test]
fn a_hang_made_by_the_forcing_is_not_forced_in_replay_and_outside_in_stress() {
    let m = model("gpu-conformance/tests/repros/g25_split_expect_after_copy.phase");
    let set = allowed_outcomes(&m, 1_000_000);
    let rep = check(&m, &CheckOptions::default());
    let v = rep
        .violations
        .iter()
        .find(|v| v.kind.name() == "data-race")
        .expect("the spec races");
    let fc = forced(&m, &v.actions).unwrap();
    let held = parse(&m, "t0 done parity=[0] | t1 HUNG");
    assert!(!set.contains(&held), "no execution hangs t1: {set}");
    let (j, info) = judge_replay(
        &m,
        &v.actions,
        &fc,
        &set,
        &[(held.clone(), 6), (fc.outcome.clone(), 26)],
        &[],
        1_000_000,
        None,
    );
    assert_eq!(j.verdict, Verdict::NotForced);
    assert_eq!((j.tally.not_forced, j.tally.outside, info.left_judged.not_forced), (6, 0, 6));
    assert!(j.why.contains("turnstile held"), "{}", j.why);
    assert_eq!(judge_stress(&set, &[(held, 1)], &[]).0.verdict, Verdict::Outside);
    // A hung thread whose records no allowed outcome starts with: OUTSIDE.
    let wrong = parse(&m, "t0 done parity=[1] | t1 HUNG");
    let (j, _) = judge_replay(&m, &v.actions, &fc, &set, &[(wrong, 1)], &[], 1_000_000, None);
    assert_eq!(j.verdict, Verdict::Outside);
}

/// A launch on the hardware's barriers that never returned says only that some thread never
/// finished: agreement where the model allows a hang, no evidence where it allows one only after
/// undefined behaviour, OUTSIDE where every outcome finishes.
#[test]
fn a_hung_launch_is_within_only_where_the_model_allows_a_thread_that_never_finishes() {
    let hangs = model("specs/soundness/prove_named_barrier_cycle.phase");
    let finishes = model("specs/soundness/prove_named_barrier_cycle_fixed.phase");
    let undefined = model("specs/hopper/named_barrier_mixed_counts.phase");
    let j = judge_launch_hung(&allowed_outcomes(&hangs, 100_000));
    assert_eq!(j.verdict, Verdict::Within);
    let j = judge_launch_hung(&allowed_outcomes(&finishes, 100_000));
    assert_eq!(j.verdict, Verdict::Outside);
    assert_eq!(j.tally.outside, 1);
    let j = judge_launch_hung(&allowed_outcomes(&undefined, 100_000));
    assert_eq!(j.verdict, Verdict::Unchecked, "{}", j.why);
    assert!(j.why.contains("undefined behaviour"));
}

/// A budget that stops the outcome enumeration leaves a subset of what the model allows: an
/// outcome it holds is within, and one it does not hold is unchecked with the budget named,
/// never OUTSIDE (the part not explored may hold it), in stress, in a hung launch and in replay.
#[test]
fn an_incomplete_allowed_set_judges_what_it_holds_and_leaves_the_rest_unchecked_never_outside() {
    let m = model("specs/mistakes/consumer_wrong_parity.phase");
    let full = allowed_outcomes(&m, 1_000_000);
    assert!(full.is_complete() && full.len() > 1, "{full}");
    // The smallest budget whose explored part holds an outcome but not all of them.
    let part = (2..10_000)
        .map(|limit| allowed_outcomes(&m, limit))
        .find(|s| !s.is_complete() && s.iter().next().is_some() && s.len() < full.len())
        .expect("some budget leaves part of the set");
    let held = part.iter().next().unwrap().clone();
    assert!(full.contains(&held), "an outcome of the explored part is allowed: {held}");
    let missed = full.iter().find(|o| !part.contains(o)).unwrap().clone();
    let (j, _) = judge_stress(&part, &[(held.clone(), 10)], &[]);
    assert_eq!(j.verdict, Verdict::Within);
    let (j, _) = judge_stress(&part, &[(held.clone(), 10), (missed.clone(), 3)], &[]);
    assert_eq!(j.verdict, Verdict::Unchecked, "{}", j.why);
    assert_eq!((j.tally.constrained, j.tally.undecided, j.tally.outside), (10, 3, 0));
    assert!(j.why.contains("stopped at its budget"), "{}", j.why);
    // What no execution allows is OUTSIDE for the whole set, and still only unchecked for the part.
    let mut never = held.clone();
    never.threads[1].reads = vec![12345];
    assert_eq!(judge_stress(&full, &[(never.clone(), 1)], &[]).0.verdict, Verdict::Outside);
    assert_eq!(judge_stress(&part, &[(never.clone(), 1)], &[]).0.verdict, Verdict::Unchecked);
    let hung = judge_launch_hung(&part);
    assert!(
        hung.verdict == Verdict::Within || hung.verdict == Verdict::Unchecked,
        "{:?}",
        hung.verdict
    );
    assert!(hang_in_model(&part));
    // Replay: a block that left its trace is judged against the part too.
    let rep = check(&m, &CheckOptions::default());
    let trace = &rep.violations[0].actions;
    let fc = forced(&m, trace).unwrap();
    let (j, _) = judge_replay(&m, trace, &fc, &part, &[(never, 1)], &[], 1_000_000, None);
    assert_ne!(j.verdict, Verdict::Outside, "{}", j.why);
}

/// The host waits long for a hardware-barrier launch only where taking a slow launch for a hang
/// would be a false OUTSIDE: exactly where the hung launch's judgement is OUTSIDE.
#[test]
fn the_long_hang_limit_goes_exactly_to_launches_whose_hang_the_model_does_not_allow() {
    for spec in [
        "specs/soundness/prove_named_barrier_cycle.phase",
        "specs/soundness/prove_named_barrier_cycle_fixed.phase",
        "specs/hopper/named_barrier_mixed_counts.phase",
    ] {
        let set = allowed_outcomes(&model(spec), 100_000);
        assert_eq!(hang_in_model(&set), judge_launch_hung(&set).verdict != Verdict::Outside, "{spec}");
    }
}

/// An edit of a TMA descriptor while a tensor copy issued through it is in flight leaves the
/// copy's landed bytes unconstrained (the H200 landed the edited descriptor's tile in 38 of 8,192
/// blocks, docs/hardware-notes.md): the model allows anything after that edit, and nothing of the
/// kind where the edit waits for the landing.
#[test]
fn an_edit_of_a_descriptor_under_its_copy_allows_anything_after_it() {
    let set = allowed_outcomes(&model("specs/hopper/tensormap_edit_under_copy.phase"), 100_000);
    assert!(
        set.undefined().any(|u| u.cause == phasecheck_model::ViolationKind::DataRace),
        "{}",
        set.summary()
    );
    let fixed = allowed_outcomes(&model("specs/hopper/tensormap_edit_under_copy_fixed.phase"), 100_000);
    assert_eq!(fixed.undefined().count(), 0, "{}", fixed.summary());
    // The unfenced edit before the issue is a race the model keeps precise: stale versions only.
    let unfenced = allowed_outcomes(&model("specs/hopper/tensormap_edit_without_fence.phase"), 100_000);
    assert_eq!(unfenced.undefined().count(), 0, "{}", unfenced.summary());
}
