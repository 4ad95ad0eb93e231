//! Differential suites: generated protocols (programs built by `phasecheck_model::strategies`,
//! not random text) run through two implementations that must agree. Each property is named by
//! its law; 256 cases each (`PROPTEST_CASES` overrides).
#![cfg(not(loom))]

use phasecheck_model::lang::{parse, pretty, same_program};
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::Model;
use phasecheck_model::strategies::{protocol, GenConfig};
use phasecheck_model::ViolationKind as K;
use phasecheck_runtime::{run, Options, Schedule};
use phasecheck_verifier::outcomes::{allowed_outcomes_capped, forced};
use phasecheck_verifier::tracefile::{self, TraceFile};
use phasecheck_verifier::{check, CheckOptions};
use proptest::prelude::*;
use std::time::Duration;

/// Bounds the model's outcome enumeration per case; a case past it is skipped (not failed).
const LIMIT: usize = 20_000;
/// The same for the fmt law's outcome comparison (it enumerates twice).
const FMT_LIMIT: usize = 5_000;
/// Observation tails an enumeration may hold (its memory): a case past it is skipped too. Two
/// test threads on a CI machine must stay well inside its memory.
const FUTURES: usize = 500_000;

fn allowed_outcomes(m: &Model, limit: usize) -> phasecheck_verifier::outcomes::AllowedSet {
    allowed_outcomes_capped(m, limit, FUTURES)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

/// Undefined behaviour the runtime detects by itself (the others need the model's happens-before
/// or phase knowledge: data-race, stale-wait, missing-wait; or are not one step: deadlock).
fn runtime_detects(k: K) -> bool {
    matches!(k, K::OverArrival | K::CountRange | K::TxRange | K::Uninitialized)
}

/// Per thread, per recorded read in order: did the model flag that read's step as a data race?
fn racy_reads(file: &TraceFile, threads: usize) -> Vec<Vec<bool>> {
    let mut out = vec![Vec::new(); threads];
    for s in &file.steps {
        if let phasecheck_model::rt::Action::Thread(t) = s.action {
            for o in &s.observed {
                if matches!(o, phasecheck_model::rt::Obs::Read { .. }) {
                    out[t as usize].push(s.raised.contains(&K::DataRace));
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_global_rejects: 4096, ..ProptestConfig::default() })]

    /// Law: every outcome of `run --cpu` (the reference runtime on OS threads) is in the set the
    /// model allows for the same program.
    #[test]
    fn cpu_outcomes_are_within_the_models_allowed_set(g in protocol(GenConfig::default()), seed in any::<u64>()) {
        let spec = g.build().map_err(TestCaseError::fail)?;
        let allowed = allowed_outcomes(&Model::new(spec.proto.clone()), LIMIT);
        prop_assume!(allowed.is_complete());
        for i in 0..2u64 {
            let opts = Options { seed: seed.wrapping_add(i), quiet: Duration::from_millis(100), ..Options::default() };
            let r = run(&spec.proto, &opts).map_err(|e| TestCaseError::fail(e.0))?;
            prop_assert!(r.broken.is_empty(), "laws broken: {:?}\n{}", r.broken, spec.source);
            prop_assert!(
                allowed.contains(&r.outcome),
                "runtime outcome outside the model\n{}\noutcome: {}\nub: {:?}\nmodel allows: {}",
                spec.source, r.outcome, r.ub, allowed
            );
        }
    }

    /// Law: a trace written by `check` (as a trace file, through its JSON) replays on the runtime:
    /// forced into the trace's order, the runtime makes the same observations (reads, try_waits,
    /// token parities, completion runs), and stops on the same undefined behaviour where it can
    /// detect it itself.
    #[test]
    fn a_trace_written_by_check_replays_on_the_runtime(g in protocol(GenConfig { syncthreads: false, ..GenConfig::default() })) {
        // One thread per warp: lanes of one warp standing at the same arrive are issued together
        // (one batched update, as the H200 does it), so a trace that moves one lane alone is not a
        // schedule the forced machine follows step for step; with `warp_size 1` every trace is.
        let spec = g.builder().warp_size(1).build().map_err(TestCaseError::fail)?;
        let model = Model::new(spec.proto.clone());
        let report = check(&model, &CheckOptions { max_states: Some(LIMIT), ..CheckOptions::default() });
        for found in &report.violations {
            let file = tracefile::build(&model, &spec.source, "generated.phase", found.kind, &found.actions)
                .map_err(TestCaseError::fail)?;
            let file = TraceFile::from_json(&file.to_json()).map_err(TestCaseError::fail)?;
            let actions: Vec<_> = file.steps.iter().map(|s| s.action).collect();
            let want = forced(&model, &actions).map_err(TestCaseError::fail)?;
            let opts = Options { schedule: Schedule::Directed(actions.clone()), wait_timeout: Duration::from_secs(3), ..Options::default() };
            let r = run(&spec.proto, &opts).map_err(|e| TestCaseError::fail(e.0))?;
            let ctx = format!("{}\ntrace ({}): {:?}\nruntime: {} ub={:?}\nmodel:   {}", spec.source, found.kind, actions, r.outcome, r.ub, want.outcome);
            prop_assert!(r.diverged.is_empty(), "the runtime could not follow the trace: {:?}\n{ctx}", r.diverged);
            prop_assert!(r.broken.is_empty(), "laws broken: {:?}\n{ctx}", r.broken);
            let racy = racy_reads(&file, spec.proto.threads.len());
            for (t, (a, b)) in r.outcome.threads.iter().zip(&want.outcome.threads).enumerate() {
                prop_assert_eq!(a.reads.len(), b.reads.len(), "reads of thread {}\n{}", t, ctx);
                for (i, (x, y)) in a.reads.iter().zip(&b.reads).enumerate() {
                    // A read the model flags as a data race has no single value: the model stamps
                    // a copy's version into the buffer when the copy is issued, the runtime when
                    // it lands; both are values the race allows (and the GPU comparison widens).
                    prop_assert!(x == y || racy[t].get(i) == Some(&true), "read {} of thread {}: runtime {} model {}\n{}", i, t, x, y, ctx);
                }
                prop_assert_eq!(&a.try_waits, &b.try_waits, "try_waits of thread {}\n{}", t, ctx);
                prop_assert_eq!(&a.token_parities, &b.token_parities, "tokens of thread {}\n{}", t, ctx);
            }
            prop_assert_eq!(&r.outcome.completions, &want.outcome.completions, "completion runs\n{}", ctx);
            let model_ub = want.undefined.filter(|k| runtime_detects(*k));
            let runtime_ub = r.ub.as_ref().map(|u| u.kind);
            match (model_ub, runtime_ub) {
                (Some(k), rt) => prop_assert_eq!(Some(k), rt, "the runtime must stop on the model's {}\n{}", k, ctx),
                (None, Some(k)) => prop_assert!(false, "the runtime stopped on {} where the model goes on\n{}", k, ctx),
                (None, None) => {}
            }
        }
    }

    /// Law: `fmt` round-trips: the canonical text parses back to the same program, and that
    /// program allows exactly the same outcomes.
    #[test]
    fn fmt_round_trips_to_the_same_program_and_outcomes(g in protocol(GenConfig::default())) {
        let spec = g.build().map_err(TestCaseError::fail)?;
        let text = pretty(&spec.ast);
        let again = parse(&text).map_err(|d| TestCaseError::fail(d.render("fmt", &text)))?;
        prop_assert!(same_program(&spec.ast, &again), "fmt changed the program:\n{}\n---\n{}", spec.source, text);
        prop_assert_eq!(pretty(&again), text.clone(), "fmt is not a fixed point");
        let p2 = lower(&again, &[]).map_err(|d| TestCaseError::fail(d.render("fmt", &text)))?;
        // The meaning check is the costly half: it runs where the enumeration stays small (most
        // cases); the syntactic laws above run on every case.
        let a = allowed_outcomes(&Model::new(spec.proto.clone()), FMT_LIMIT);
        if a.is_complete() {
            let b = allowed_outcomes(&Model::new(p2), FMT_LIMIT);
            prop_assert_eq!(a, b, "fmt changed the allowed outcomes\n{}", text);
        }
    }
}
