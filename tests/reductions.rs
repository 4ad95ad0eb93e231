//! The engine's reductions keep verdicts: symmetry of interchangeable threads, the partial-order
//! reduction, parallel expansion and interned storage are each compared with a search without
//! them, over the whole library; exact state
//! counts (of the search without partial-order reduction) are pinned against a naive
//! breadth-first search written here, independent of the engine.

mod common;

use phasecheck_model::rt::state::State;
use phasecheck_model::rt::Model;
use phasecheck_model::spec::load;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, CheckOptions, Report, Verdict};
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::path::{Path, PathBuf};

/// Every spec of the library (the CLI's own folder walk).
fn library() -> Vec<PathBuf> {
    phasecheck_model::spec::expand(&[PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("specs")]).unwrap()
}

fn model_of(path: &Path, params: &[(String, i64)]) -> Model {
    let spec = load(path, params).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Model::new(spec.proto)
}

/// Without partial-order reduction (what the exact counts and the symmetry comparisons are about).
fn run(model: &Model, symmetry: bool, threads: usize) -> Report {
    run_with(model, symmetry, false, threads)
}

fn run_with(model: &Model, symmetry: bool, por: bool, threads: usize) -> Report {
    let opts = CheckOptions {
        symmetry,
        por,
        threads,
        max_states: Some(2_000_000),
        ..CheckOptions::default()
    };
    let r = check(model, &opts);
    assert_ne!(r.verdict, Verdict::InternalError, "{:?}", r.internal);
    r
}

fn kinds(r: &Report) -> BTreeSet<ViolationKind> {
    r.violations.iter().map(|v| v.kind).collect()
}

/// The unreduced state graph, explored the plainest way: every `State` as the model builds it,
/// in a hash set; final states (the CTA exited under a copy) not expanded, as the checker does.
fn naive_state_count(model: &Model) -> usize {
    let Some(s0) = model.init().next else { return 0 };
    let mut seen: HashSet<State> = HashSet::new();
    let mut queue = VecDeque::new();
    seen.insert(s0.clone());
    queue.push_back(s0);
    let mut en = Vec::new();
    while let Some(s) = queue.pop_front() {
        if s.all_done() && !s.copies.is_empty() {
            continue;
        }
        en.clear();
        model.actions(&s, &mut en);
        for &a in &en {
            if let Some(n) = model.step(&s, a).next {
                if seen.insert(n.clone()) {
                    queue.push_back(n);
                }
            }
        }
    }
    seen.len()
}

// The library in two halves (every other file), two tests the harness runs at once on a
// two-core runner. Each spec is searched once per configuration (seven: symmetry on and off,
// the partial-order reduction on and off, one and two threads) and every comparison below reads
// those runs, instead of each law searching again (the three laws searched eleven times a spec).
#[test]
fn symmetry_partial_order_and_parallel_expansion_keep_every_verdict_of_the_library_first_half() {
    reductions_keep_the_verdicts_of(0);
}

#[test]
fn symmetry_partial_order_and_parallel_expansion_keep_every_verdict_of_the_library_second_half() {
    reductions_keep_the_verdicts_of(1);
}

fn traces(r: &Report) -> Vec<(ViolationKind, Vec<phasecheck_model::rt::Action>, String)> {
    r.violations
        .iter()
        .map(|v| (v.kind, v.actions.clone(), v.message.clone()))
        .collect()
}

fn reductions_keep_the_verdicts_of(half: usize) {
    let (mut applicable, mut reduced_somewhere) = (0, 0);
    let files: Vec<PathBuf> = library().into_iter().skip(half).step_by(2).collect();
    assert!(files.len() >= 30);
    for path in files {
        let model = model_of(&path, &[]);
        let name = path.display();
        let plain = run(&model, false, 1);
        let sym = run(&model, true, 1);
        let sym_parallel = run(&model, true, 2);

        // Symmetry keeps the verdict and the kinds, never stores more; parallel expansion does the
        // bookkeeping in frontier order: the same search exactly.
        assert_eq!(plain.verdict, sym.verdict, "{name}: symmetry changed the verdict");
        assert_eq!(kinds(&plain), kinds(&sym), "{name}: symmetry changed the kinds");
        assert!(sym.stats.states <= plain.stats.states, "{name}: symmetry stored more states");
        assert_eq!(
            sym.stats.states, sym_parallel.stats.states,
            "{name}: thread count changed the state count"
        );
        assert_eq!(sym.stats.transitions, sym_parallel.stats.transitions, "{name}");
        // The workers intern a chunk's new components shard by shard: the store holds the same.
        assert_eq!(
            sym.stats.bytes_per_state, sym_parallel.stats.bytes_per_state,
            "{name}: thread count changed what the store holds"
        );
        assert_eq!(traces(&sym), traces(&sym_parallel), "{name}: thread count changed a trace");

        // Traces found on canonical states replay concretely with their kind, and each is the
        // shortest for its kind: no longer than the unreduced search's.
        for v in &sym_parallel.violations {
            let replayed = phasecheck_verifier::trace::replay(&model, &v.actions)
                .unwrap_or_else(|e| panic!("{name}: {} trace does not replay: {e:?}", v.kind));
            assert!(!replayed.steps.is_empty() || v.actions.is_empty());
        }
        for (a, b) in sym_parallel.violations.iter().zip(&plain.violations) {
            assert_eq!(a.kind, b.kind);
            assert!(a.actions.len() <= b.actions.len(), "{name}: {} trace got longer", a.kind);
        }

        // The partial-order reduction, with symmetry on and off, finds exactly the verdict and the
        // kinds of the search without it, never stores more states, does not depend on the
        // thread count, and its traces replay concretely with their kind.
        applicable += model.por.applicable as usize;
        for (symmetry, full) in [(false, &plain), (true, &sym)] {
            let por = run_with(&model, symmetry, true, 1);
            let parallel = run_with(&model, symmetry, true, 2);
            assert_eq!(full.verdict, por.verdict, "{name} (symmetry {symmetry}): POR changed the verdict");
            assert_eq!(kinds(full), kinds(&por), "{name} (symmetry {symmetry}): POR changed the kinds");
            assert!(por.stats.states <= full.stats.states, "{name}: POR stored more states");
            reduced_somewhere += (por.stats.reduced_states > 0) as usize;
            assert_eq!(
                por.stats.states, parallel.stats.states,
                "{name}: thread count changed the POR state count"
            );
            assert_eq!(por.stats.transitions, parallel.stats.transitions, "{name}");
            assert_eq!(por.stats.reduced_states, parallel.stats.reduced_states, "{name}");
            assert_eq!(traces(&por), traces(&parallel), "{name}: thread count changed a POR trace");
            for v in &por.violations {
                let replayed = phasecheck_verifier::trace::replay(&model, &v.actions)
                    .unwrap_or_else(|e| panic!("{name}: {} trace found under POR does not replay: {e:?}", v.kind));
                assert!(!replayed.steps.is_empty() || v.actions.is_empty());
            }
            if !model.por.applicable {
                assert_eq!(por.stats.states, full.stats.states, "{name}: POR ran where it does not apply");
                assert!(!por.stats.reductions.iter().any(|r| r == "partial-order"), "{name}");
            }
        }
    }
    eprintln!("POR applies to {applicable} specs of this half; reduced some state in {reduced_somewhere} runs");
    assert!(applicable > 0 && reduced_somewhere > 0, "the library never exercises the reduction");
}

/// The comparison above can fail: a reduction that ignores conflicts (the planted defect
/// `por-ignores-conflicts` expands only the first enabled thread step) loses kinds on the library.
#[test]
fn a_partial_order_reduction_that_ignores_conflicts_loses_kinds() {
    let mut lost = Vec::new();
    for path in library() {
        let mut model = model_of(&path, &[]);
        if !model.por.applicable {
            continue;
        }
        let full = run_with(&model, true, false, 1);
        model.mutant = Some(phasecheck_model::rt::Mutant::PorIgnoresConflicts);
        let broken = check(
            &model,
            &CheckOptions {
                threads: 1,
                max_states: Some(2_000_000),
                ..CheckOptions::default()
            },
        );
        if kinds(&full) != kinds(&broken) {
            lost.push(path.display().to_string());
        }
    }
    eprintln!("the unsound reduction changes the kinds of {} specs", lost.len());
    assert!(lost.len() >= 3, "an unsound reduction went unnoticed: {lost:?}");
}

/// Exact counts: the engine without symmetry stores exactly the naive search's states (packing,
/// interning and epoch handling lose and merge nothing), and with symmetry, and with symmetry and
/// the partial-order reduction (its cut at waits included), the pinned counts.
#[test]
fn state_counts_match_a_naive_breadth_first_search() {
    let cases: [(&str, &[(&str, i64)], usize, usize, usize); 7] = [
        ("specs/guide/double_buffer.phase", &[], 305, 188, 88),
        ("specs/guide/ring_k_stage.phase", &[], 1_312, 772, 273),
        ("specs/guide/producer_warp_consumer_warps.phase", &[], 3_922, 1_618, 883),
        ("specs/mistakes/consumer_wrong_parity.phase", &[], 64, 64, 54),
        // Lanes that read their identity are not interchangeable: no reduction.
        ("specs/mistakes/diverged_warp_commit.phase", &[], 25_304, 25_304, 14_332),
        ("specs/field/cutlass_pingpong_consumer_state_advance.phase", &[], 909, 909, 250),
        (
            "benches/double_buffer_scaling.phase",
            &[("STAGES", 3), ("CONSUMERS", 3), ("ITERS", 9)],
            16_183,
            3_964,
            839,
        ),
    ];
    for (file, params, naive_pinned, sym_pinned, por_pinned) in cases {
        let params: Vec<(String, i64)> = params.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let model = model_of(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file), &params);
        let naive = naive_state_count(&model);
        let plain = run(&model, false, 1);
        let reduced = run(&model, true, 2);
        eprintln!(
            "{file}: naive {naive}, engine {}, symmetric {}",
            plain.stats.states, reduced.stats.states
        );
        assert_eq!(plain.stats.states, naive, "{file}: engine without symmetry vs naive search");
        assert_eq!(naive, naive_pinned, "{file}: naive count");
        assert_eq!(reduced.stats.states, sym_pinned, "{file}: symmetric count");
        let por = run_with(&model, true, true, 2);
        assert_eq!(por.stats.states, por_pinned, "{file}: symmetric and partial-order count");
    }
}

/// Interned storage: a state costs about the same at any depth (the double buffer at 8 and at 200
/// iterations: within 10% of each other, either way).
#[test]
fn bytes_per_state_do_not_grow_with_depth() {
    let per = |iters: i64| {
        let model = model_of(
            &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("specs/guide/double_buffer.phase"),
            &[("ITERS".to_string(), iters)],
        );
        run(&model, true, 2).stats.bytes_per_state
    };
    let (short, long) = (per(8), per(200));
    eprintln!("bytes/state: ITERS=8 {short:.1}, ITERS=200 {long:.1}");
    assert!(
        (long - short).abs() <= 0.10 * short.min(long),
        "ITERS=8: {short:.1} B/state, ITERS=200: {long:.1} B/state"
    );
}

/// The CLI's default run on a buggy ring says violated, like `--past-violation-factor` and `--stop-at-first`.
#[test]
fn buggy_ring_is_violated_in_every_mode() {
    let f = "benches/spin/ring_bug_wrong_parity.phase";
    for mode in [
        &[][..],
        &["--past-violation-factor", "2"][..],
        &["--stop-at-first"][..],
        &["--no-por"][..],
    ] {
        let mut args = vec!["check", f, "--param", "STAGES=2", "--param", "CONSUMERS=2", "--param", "ITERS=4"];
        args.extend_from_slice(mode);
        let out = common::phasecheck(&args);
        assert_eq!(common::code(&out), 1, "{mode:?}: {}", common::text(&out.stdout));
    }
}

/// A search that stops inside a chunk (at its first violation, or at a state bound) reports the
/// same states, traces and bytes per state on any thread count: the components the workers
/// interned for successors it never entered are dropped. Over the library's violated specs and
/// the GEMM's planted bugs, one thread against three.
#[test]
fn a_search_stopped_inside_a_chunk_reports_the_same_on_any_thread_count() {
    let mut specs = library();
    specs.extend(
        phasecheck_model::spec::expand(&[PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/realshape")])
            .unwrap()
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("_bug_")),
    );
    let mut stopped_early = 0;
    for path in specs {
        let model = model_of(&path, &[]);
        for (stop_at_first, max_states) in [(true, None), (false, Some(3_000))] {
            let run = |threads| {
                check(
                    &model,
                    &CheckOptions {
                        stop_at_first,
                        max_states: max_states.or(Some(2_000_000)),
                        threads,
                        ..CheckOptions::default()
                    },
                )
            };
            let (one, three) = (run(1), run(3));
            if one.verdict == Verdict::Holds {
                continue;
            }
            stopped_early += usize::from(one.stats.states >= 2_000);
            let name = path.display();
            assert_eq!(one.verdict, three.verdict, "{name}");
            assert_eq!(one.stats.states, three.stats.states, "{name}");
            assert_eq!(one.stats.bytes_per_state, three.stats.bytes_per_state, "{name}: the store differs");
            assert_eq!(traces(&one), traces(&three), "{name}");
        }
    }
    assert!(stopped_early > 0, "no search was large enough to stop inside a parallel chunk");
}
