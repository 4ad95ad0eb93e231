//! The partial-order reduction's law, checked inside the model crate: on every library spec small
//! enough to walk in full, a depth-first search that expands only the persistent subset the model
//! offers (`TransitionSystem::persistent`, with the stack proviso and the fall-back to the full
//! set when a chosen step ends its execution) reaches exactly the violation kinds the full search
//! reaches.
//!
//! The engine's own law tests (tests/reductions.rs, tests/por_constructs.rs) compare its searches;
//! this one needs no engine, so a defect in a construct's footprint (`rt/footprint*`) fails a test
//! of the crate that holds the footprints: the mutation sample judges a mutant by this crate's
//! tests and the library record (docs/mutants.md), and a footprint that forgets a conflict can
//! keep every library verdict of the breadth-first engine while this walk still tells.

use phasecheck_model::rt::state::State;
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::ts::TransitionSystem;
use phasecheck_model::ViolationKind;
use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

/// Walks past this many states are not run (the spec is left to the engine's tests).
const CAP: usize = 3000;

fn canonical(m: &Model, mut s: State) -> State {
    use phasecheck_model::ts::Packed;
    let mut perm = Vec::new();
    m.canonicalize(&mut s, false, &mut perm);
    s
}

fn enabled(m: &Model, s: &State) -> Vec<Action> {
    let mut enabled = Vec::new();
    m.actions(s, &mut enabled);
    enabled
}

/// The actions enabled at `s`, and the persistent subset the model offers there (`None`: no
/// reduction, every enabled action is expanded).
fn enabled_and_persistent(m: &Model, s: &State) -> (Vec<Action>, Option<Vec<Action>>) {
    let enabled = enabled(m, s);
    let mut subset = Vec::new();
    let reduced = m.persistent(s, &enabled, &mut subset);
    (enabled, reduced.then_some(subset))
}

/// Every violation kind reachable from the initial state; `None` past `CAP` states.
fn reachable_kinds(m: &Model, reduce: bool) -> Option<(BTreeSet<ViolationKind>, usize)> {
    struct Frame {
        s: State,
        next: Vec<State>,
    }
    let mut kinds = BTreeSet::new();
    let init = m.init();
    kinds.extend(init.violations.iter().map(|v| v.kind));
    let Some(s0) = init.next else { return Some((kinds, 0)) };
    let mut visited: HashSet<State> = HashSet::new();
    let mut on_stack: HashSet<State> = HashSet::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut enabled = Vec::new();
    let mut subset = Vec::new();
    let mut open = |s: State, kinds: &mut BTreeSet<ViolationKind>, on_stack: &HashSet<State>| -> Frame {
        enabled.clear();
        m.actions(&s, &mut enabled);
        kinds.extend(m.state_violations(&s, &enabled).into_iter().map(|v| v.kind));
        let expand = |acts: &[Action], kinds: &mut BTreeSet<ViolationKind>| -> (Vec<State>, bool) {
            let mut next = Vec::new();
            let mut keep = true;
            for &a in acts {
                let out = m.step(&s, a);
                assert!(out.internal.is_none(), "internal error: {:?}", out.internal);
                kinds.extend(out.violations.iter().map(|v| v.kind));
                match out.next {
                    Some(n) => {
                        let n = canonical(m, n);
                        keep &= !on_stack.contains(&n) && n != s;
                        next.push(n);
                    }
                    None => keep = false,
                }
            }
            (next, keep)
        };
        subset.clear();
        let reduced = reduce && !m.is_final(&s) && m.persistent(&s, &enabled, &mut subset);
        let next = if reduced {
            // The subset's violations are kept even if it is rolled back: they are reachable.
            let (next, keep) = expand(&subset.clone(), kinds);
            if keep {
                next
            } else {
                expand(&enabled.clone(), kinds).0
            }
        } else {
            expand(&enabled.clone(), kinds).0
        };
        Frame { s, next }
    };
    let s0 = canonical(m, s0);
    visited.insert(s0.clone());
    on_stack.insert(s0.clone());
    stack.push(open(s0, &mut kinds, &on_stack));
    while let Some(top) = stack.last_mut() {
        match top.next.pop() {
            Some(n) => {
                if visited.insert(n.clone()) {
                    if visited.len() > CAP {
                        return None;
                    }
                    on_stack.insert(n.clone());
                    let f = open(n, &mut kinds, &on_stack);
                    stack.push(f);
                }
            }
            None => {
                let f = stack.pop().unwrap();
                on_stack.remove(&f.s);
            }
        }
    }
    Some((kinds, visited.len()))
}

/// The model of spec text that parses, checks and lowers.
fn model_of(src: &str) -> Model {
    let ast = phasecheck_model::lang::parse(src).unwrap();
    phasecheck_model::lang::check(&ast).unwrap();
    Model::new(phasecheck_model::program::lower::lower(&ast, &[]).unwrap())
}

fn library() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs");
    phasecheck_model::spec::expand(&[root]).expect("the library is readable")
}

#[test]
fn the_reduced_walk_reaches_every_kind_the_full_walk_reaches_on_every_small_library_spec() {
    let (mut compared, mut violated, mut pruned) = (0, 0, 0);
    let mut differ = Vec::new();
    for path in library() {
        let spec = phasecheck_model::spec::load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
        let m = Model::new(spec.proto);
        let Some((full, all)) = reachable_kinds(&m, false) else { continue };
        let (reduced, fewer) = reachable_kinds(&m, true).expect("the reduced walk is no larger than the full one");
        compared += 1;
        if reduced != full {
            differ.push(format!("{}: full {full:?}, reduced {reduced:?}", path.display()));
        }
        violated += usize::from(!full.is_empty());
        pruned += usize::from(fewer < all);
    }
    assert!(differ.is_empty(), "the reduction changed the kinds:\n{}", differ.join("\n"));
    // The law must cover the library, and the reduction must have pruned something in it.
    eprintln!("{compared} specs compared, {violated} with a violation, {pruned} walked in fewer states reduced");
    assert!(compared >= 150, "only {compared} specs were small enough to compare");
    assert!(violated >= 50, "only {violated} compared specs have a violation");
    assert!(pruned >= 50, "the reduction pruned only {pruned} of them");
}

/// Arrivals on a named barrier that together reach its count at most commute (docs/model.md,
/// the reduction and named barriers): from the start of a producer warp's `bar_arrive(1, 64)`
/// and a consumer warp's `bar_sync(1, 64)` (two warps of 32: the count exactly), the reduction
/// expands one warp's arrival, not both orders, and the reduced walk still reaches what the full
/// one does.
#[test]
fn arrivals_that_exactly_fill_an_idle_named_barrier_commute() {
    let src = "protocol p\nwarp_size 32\nrole producer warps 1 uniform {\n  bar_arrive(1, 64)\n}\nrole consumer warps 1 uniform {\n  bar_sync(1, 64)\n}\n";
    let m = model_of(src);
    let s = m.init().next.expect("initial state");
    let (enabled, subset) = enabled_and_persistent(&m, &s);
    assert_eq!(enabled.len(), 2);
    let subset = subset.expect("no reduction");
    assert_eq!(subset.len(), 1, "{subset:?}");
    let (full, all) = reachable_kinds(&m, false).unwrap();
    let (reduced, fewer) = reachable_kinds(&m, true).unwrap();
    assert_eq!((&full, &reduced), (&BTreeSet::new(), &BTreeSet::new()));
    assert!(fewer < all, "{fewer} states reduced, {all} in full");
}

/// The commutation of arrivals that fill an idle named barrier holds for every barrier id, the
/// `__syncthreads` barrier 0 and the last one (15) included: the rule is about counts, not ids,
/// so a protocol on barrier 0 is reduced as much as the same protocol on barrier 1.
#[test]
fn arrivals_that_exactly_fill_an_idle_named_barrier_commute_whatever_its_id() {
    for id in [0, 1, 15] {
        let src = format!("protocol p\nwarp_size 32\nrole producer warps 1 uniform {{\n  bar_arrive({id}, 64)\n}}\nrole consumer warps 1 uniform {{\n  bar_sync({id}, 64)\n}}\n");
        let m = model_of(&src);
        let s = m.init().next.expect("initial state");
        let (enabled, subset) = enabled_and_persistent(&m, &s);
        assert_eq!(enabled.len(), 2, "barrier {id}");
        let subset = subset.unwrap_or_else(|| panic!("barrier {id}: no reduction"));
        assert_eq!(subset.len(), 1, "barrier {id}: {subset:?}");
        let (full, all) = reachable_kinds(&m, false).unwrap();
        let (reduced, fewer) = reachable_kinds(&m, true).unwrap();
        assert_eq!((&full, &reduced), (&BTreeSet::new(), &BTreeSet::new()), "barrier {id}");
        assert!(fewer < all, "barrier {id}: {fewer} states reduced, {all} in full");
    }
}

/// A `fence_proxy_async()` also covers another thread's write that is ordered before it, so it
/// does not commute with a TMA store of that buffer by a third thread: the store issued before
/// the fence is a data race across proxies, after it is not. The reduction must expand both
/// orders, and the reduced walk reaches the race the full one does.
#[test]
fn a_fence_over_another_threads_ordered_write_does_not_commute_with_a_store_of_it() {
    let src = "protocol p\nbarrier b count 1\nbuffer d bytes 64\nrole a[1] {\n  write(d, 1)\n  arrive(b)\n}\nrole f[1] {\n  wait_parity(b, 0)\n  fence_proxy_async()\n}\nrole s[1] {\n  wait_parity(b, 0)\n  copy_store_async(d)\n  commit_group()\n  wait_group_read(0)\n}\n";
    let m = model_of(src);
    let (full, _) = reachable_kinds(&m, false).unwrap();
    let (reduced, _) = reachable_kinds(&m, true).unwrap();
    assert_eq!(full, [ViolationKind::DataRace].into_iter().collect());
    assert_eq!(reduced, full);
}

/// Arrivals on an idle named barrier that name different counts do not commute (docs/model.md,
/// the reduction and named barriers: from an idle barrier, every counted arrival must name one
/// count): the first warp to arrive fixes the use's count and the other's arrival is the
/// mismatch, so the order decides which warp's arrival is undefined behaviour. A persistent
/// subset that takes the producer warp's `bar_arrive(1, 64)` must take the consumer warp's
/// `bar_sync(1, 96)` too, also when it is seeded by a third warp whose step (a write that the
/// producer's later write conflicts with) names no barrier.
#[test]
fn arrivals_that_name_different_counts_on_an_idle_named_barrier_do_not_commute() {
    let src = "protocol p\nwarp_size 32\nbuffer d bytes 64\nrole a warps 1 uniform {\n  write(d, 1)\n}\nrole producer warps 1 uniform {\n  bar_arrive(1, 64)\n  write(d, 2)\n}\nrole consumer warps 1 uniform {\n  bar_sync(1, 96)\n}\n";
    let m = model_of(src);
    let s = m.init().next.expect("initial state");
    let (enabled, subset) = enabled_and_persistent(&m, &s);
    assert_eq!(enabled, [Action::Thread(0), Action::Thread(1), Action::Thread(2)]);
    if let Some(subset) = subset {
        assert!(
            !subset.contains(&Action::Thread(1)) || subset.contains(&Action::Thread(2)),
            "the producer's arrival is expanded without the consumer's: {subset:?}"
        );
    }
}

/// A `fence_proxy_async()` that a thread has yet to reach still conflicts with another thread's
/// TMA store of a buffer a third thread wrote generically (docs/model.md, the async proxy and the
/// reduction): the fence may clear the buffer's unfenced flag, which the store's issue reads, so
/// the store issued before the fence races across proxies and after it does not. The fencing
/// thread's future writes the flag of every buffer a thread writes generically; a persistent
/// subset that takes the store must take the fencer's step too, although the fencer's own step (a
/// parity wait) commutes with the store.
#[test]
fn a_store_does_not_commute_with_a_fence_that_another_thread_has_yet_to_reach() {
    let src = "protocol p\nbarrier b count 1\nbuffer d bytes 64\nrole a[1] {\n  write(d, 1)\n  arrive(b)\n}\nrole s[1] {\n  wait_parity(b, 0)\n  copy_store_async(d)\n  commit_group()\n  wait_group_read(0)\n}\nrole f[1] {\n  wait_parity(b, 0)\n  fence_proxy_async()\n}\n";
    let m = model_of(src);
    let mut s = m.init().next.expect("initial state");
    // The writer writes and arrives (the phase completes), then the storer passes its wait.
    for t in [0u16, 0, 1] {
        let enabled = enabled(&m, &s);
        assert!(enabled.contains(&Action::Thread(t)), "{t}: {enabled:?}");
        s = m.step(&s, Action::Thread(t)).next.expect("a next state");
    }
    let (enabled, subset) = enabled_and_persistent(&m, &s);
    assert!(
        enabled.contains(&Action::Thread(1)) && enabled.contains(&Action::Thread(2)),
        "{enabled:?}"
    );
    if let Some(subset) = subset {
        assert!(
            !subset.contains(&Action::Thread(1)) || subset.contains(&Action::Thread(2)),
            "the store is expanded without the fencer's step: {subset:?} of {enabled:?}"
        );
    }
}

/// At `warp_size 1` one other arrival on an idle named barrier adds a single thread; it still
/// fixes the use's count if it comes first (docs/model.md, the reduction and named barriers: from
/// an idle barrier every counted arrival must name one count), so a `bar_arrive(1, 2)` and a
/// `bar_sync(1, 3)` do not commute: the order decides which one is the mismatch. A persistent
/// subset that takes one takes the other.
#[test]
fn a_single_thread_arrival_that_names_another_count_on_an_idle_named_barrier_does_not_commute() {
    let src = "protocol p\nwarp_size 1\nrole producer[1] {\n  bar_arrive(1, 2)\n}\nrole consumer[1] {\n  bar_sync(1, 3)\n}\n";
    let m = model_of(src);
    let s = m.init().next.expect("initial state");
    let (enabled, subset) = enabled_and_persistent(&m, &s);
    assert_eq!(enabled, [Action::Thread(0), Action::Thread(1)]);
    if let Some(subset) = subset {
        assert!(
            subset.contains(&Action::Thread(0)) == subset.contains(&Action::Thread(1)),
            "one arrival is expanded without the other: {subset:?}"
        );
    }
}
