//! Runner pieces that need no GPU: the replay schedule, parsing a block's results, no-driver exit.

use phasecheck_gpu::codegen::{generate, status, Backend, CAP, HEADER_WORDS, THREAD_WORDS};
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::spec::load as load_spec;
use phasecheck_verifier::outcomes::{commit_mates, replay_schedule, schedule};
use phasecheck_verifier::{check, CheckOptions};
use std::path::PathBuf;

fn fixture(name: &str) -> phasecheck_model::spec::Spec {
    load_spec(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name), &[]).unwrap()
}

#[test]
fn schedule_numbers_thread_steps_and_drops_landings() {
    let acts = [Action::Thread(1), Action::Land(0), Action::Thread(0), Action::Thread(1)];
    // [mode, total, off0, off1, cnt0, cnt1, turns of t0..., turns of t1...]
    assert_eq!(schedule(2, &acts, &[]), vec![1, 3, 6, 7, 1, 2, 1, 0, 2]);
}

#[test]
fn schedule_of_a_real_trace_covers_every_thread_step() {
    let spec = fixture("wrong_parity.phase");
    let model = Model::new(spec.proto.clone());
    let rep = check(&model, &CheckOptions::default());
    assert!(!rep.violations.is_empty());
    for v in &rep.violations {
        let s = schedule(spec.proto.threads.len(), &v.actions, &[]);
        let steps = v.actions.iter().filter(|a| matches!(a, Action::Thread(_))).count() as i32;
        assert_eq!(s[1], steps);
        let nt = spec.proto.threads.len();
        let mut turns: Vec<i32> = s[2 + 2 * nt..].to_vec();
        turns.sort();
        assert_eq!(turns, (0..steps).collect::<Vec<_>>(), "every turn exactly once");
    }
}

#[test]
fn schedule_gives_a_group_commit_turn_to_every_converged_lane() {
    // commit_warp: four converged lanes of one warp start at `commit(b)`. Lane 2's step is the
    // group's one arrival; lanes 0, 1, 3 join it (Obs::CommitJoined) and must run on that turn too.
    let spec = fixture("commit_warp.phase");
    let model = Model::new(spec.proto.clone());
    let acts = [Action::Thread(2)];
    let mates = commit_mates(&model, &acts);
    assert_eq!(mates, vec![vec![0, 1, 3]]);
    // [mode, total, off0..off3, cnt0..cnt3, turns]: one turn (0), held by all four lanes.
    assert_eq!(schedule(4, &acts, &mates), vec![1, 1, 10, 11, 12, 13, 1, 1, 1, 1, 0, 0, 0, 0]);
    assert_eq!(replay_schedule(&model, &acts), schedule(4, &acts, &mates));

    // A whole execution of a spec whose warps commit after syncwarp (warp_size 2): each commit
    // turn is held by both lanes of the warp, every turn is held by someone, and each lane's turns
    // increase.
    let spec = load_spec(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs/guide/commit_after_syncwarp.phase"),
        &[],
    )
    .unwrap();
    let model = Model::new(spec.proto.clone());
    let (mut r, _) = phasecheck_model::rt::path::Replay::start(&model);
    let mut acts = Vec::new();
    while !r.state().expect("the run has not ended").all_done() {
        let a = r.enabled()[0];
        r.take(a).expect("an enabled action replays");
        acts.push(a);
    }
    let mates = commit_mates(&model, &acts);
    let groups: Vec<usize> = mates.iter().filter(|m| !m.is_empty()).map(|m| m.len()).collect();
    assert_eq!(groups, vec![1, 1], "one group commit per warp, one mate each: {mates:?}");
    let nt = spec.proto.threads.len();
    let sched = replay_schedule(&model, &acts);
    let total = sched[1];
    assert_eq!(total as usize, acts.iter().filter(|a| matches!(a, Action::Thread(_))).count());
    let mut held = vec![0; total as usize];
    for t in 0..nt {
        let (off, cnt) = (sched[2 + t] as usize, sched[2 + nt + t] as usize);
        let turns = &sched[off..off + cnt];
        assert!(turns.windows(2).all(|w| w[0] < w[1]), "thread {t}: {turns:?}");
        for &k in turns {
            held[k as usize] += 1;
        }
    }
    assert!(held.iter().all(|&h| h >= 1));
    assert_eq!(
        held.iter().filter(|&&h| h == 2).count(),
        2,
        "the two group commits are the only shared turns"
    );
}

#[test]
fn block_records_parse_into_outcome_vectors() {
    let spec = fixture("double_buffer.phase");
    let k = generate(&spec.proto, &spec.source, Backend::Ptx, 0).unwrap();
    assert_eq!(k.block_words, 3 * THREAD_WORDS + 2 * 4);
    let mut w = vec![0i32; k.block_words];
    // thread 1: finished, read versions 0 and -1 (torn), one bad expect
    let t = THREAD_WORDS;
    w[t] = status::FINISHED;
    w[t + 1] = 2;
    w[t + 4] = 1;
    w[t + HEADER_WORDS] = 0;
    w[t + HEADER_WORDS + 1] = -1;
    // thread 0: hung after two tokens of parity 0, 1
    w[0] = status::HUNG;
    w[3] = 2;
    w[HEADER_WORDS + 2 * CAP] = 0;
    w[HEADER_WORDS + 2 * CAP + 1] = 1;
    w[3 * THREAD_WORDS + 2] = 5; // completions of barrier 2
    w[3 * THREAD_WORDS + 4] = 4 | 2; // barrier 0: parity 1 complete, phase of parity 0 in progress
    w[3 * THREAD_WORDS + 5] = 4 | 1; // barrier 1: parity 1 in progress
    let r = k.parse_block(&w);
    assert_eq!(r.probes, vec![6, 5, 0, 0]);
    let (_, end, _) = phasecheck_gpu::compare::outcome_of(&k, &w, 0);
    assert_eq!(end.parity, vec![0, 1, 2, 2]);
    assert_eq!(r.threads[1].reads, vec![0, -1]);
    assert_eq!(r.threads[1].bad_expect, 1);
    assert_eq!(r.threads[0].status, status::HUNG);
    assert_eq!(r.threads[0].token_parities, vec![0, 1]);
    assert_eq!(r.completions, vec![0, 0, 5, 0]);
}

#[test]
fn completion_vars_are_read_back_from_the_block() {
    let spec = fixture("completion_rotate.phase");
    let k = generate(&spec.proto, &spec.source, Backend::Libcu, 0).unwrap();
    let ncv = phasecheck_verifier::outcomes::completion_vars(&spec.proto).len();
    assert!(ncv > 0);
    let nb = spec.proto.barriers.len();
    assert_eq!(k.block_words, k.threads * THREAD_WORDS + 2 * nb + 1 + 2 * ncv);
    let mut w = vec![0i32; k.block_words];
    assert!(k.parse_block(&w).end_vars.is_empty(), "no marker: not recorded");
    let at = k.threads * THREAD_WORDS + 2 * nb;
    w[at] = 1;
    w[at + 1] = -5; // low word of -5
    w[at + 2] = -1; // high word
    assert_eq!(k.parse_block(&w).end_vars[0], -5);
    assert!(k.source().contains("vars[0] = 1;"));
}

#[test]
fn without_a_driver_gpu_run_says_so_and_exits_zero() {
    if phasecheck_gpu::sys::driver_present() {
        return; // a real GPU machine: covered by run-on-device.sh
    }
    let exe = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let args = phasecheck_gpu::plan::Settings {
        paths: vec![exe],
        runs: 16,
        out: Some(std::env::temp_dir().join("pc-no-driver.json")),
        ..Default::default()
    };
    assert_eq!(phasecheck_gpu::runner::run(&args), 0);
    assert!(
        !std::env::temp_dir().join("pc-no-driver.json").exists(),
        "nothing may be written when nothing ran"
    );
}

#[test]
fn an_early_stopping_trace_forces_only_a_prefix() {
    // kinds/stale_wait: the trace stops with the observer blocked on an aliased parity; on the GPU
    // the workers' last round releases it, so "t2 finished" is what the trace forces, as a prefix.
    use phasecheck_gpu::compare::as_forced;
    use phasecheck_verifier::outcomes::forced;
    let spec = load_spec(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs/kinds/stale_wait.phase"),
        &[],
    )
    .unwrap();
    let model = Model::new(spec.proto.clone());
    let rep = check(&model, &CheckOptions::default());
    let v = rep.violations.iter().find(|v| v.kind.name() == "stale-wait").unwrap();
    let fc = forced(&model, &v.actions).unwrap();
    assert!(!fc.outcome.threads[2].finished);
    let mut seen = fc.outcome.clone();
    seen.threads[2].finished = true;
    for t in &mut seen.threads {
        t.finished = true;
    }
    assert!(as_forced(&fc, &seen));
    seen.fault = true;
    assert!(!as_forced(&fc, &seen));
}
