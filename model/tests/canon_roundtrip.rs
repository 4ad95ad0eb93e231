//! The packed form of a state is the state: for every state the library's specs reach (a
//! bounded breadth-first walk per spec, raw and canonical forms), `unpack_state(pack_state(s))`
//! gives back `s`. A field added to the state and forgotten in `canon.rs` fails here.

use phasecheck_model::rt::state::State;
use phasecheck_model::rt::Model;
use phasecheck_model::spec::{expand, load};
use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;

const STATES_PER_SPEC: usize = 3000;

fn roundtrip(m: &Model, s: &State) -> State {
    let (mut words, mut ends) = (Vec::new(), Vec::new());
    m.pack_state(s, &mut words, &mut ends);
    assert_eq!(ends.len(), m.component_count());
    let mut parts: Vec<&[u32]> = Vec::new();
    let mut start = 0usize;
    for &e in &ends {
        parts.push(&words[start..e as usize]);
        start = e as usize;
    }
    m.unpack_state(&parts)
}

#[test]
fn packing_then_unpacking_gives_back_every_reached_state_of_the_library() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let files = expand(&[root]).expect("specs folder");
    assert!(files.len() >= 98, "found only {} specs", files.len());
    let mut checked = 0usize;
    for f in files {
        let spec = load(&f, &[]).unwrap_or_else(|e| panic!("{e}"));
        let m = Model::new(spec.proto);
        checked += roundtrip_reached(&m, &f.display().to_string());
    }
    assert!(checked > 1000, "only {checked} states checked");
}

/// The states of `m` a bounded breadth-first walk reaches each give themselves back, raw and
/// canonical; returns how many were checked.
fn roundtrip_reached(m: &Model, label: &str) -> usize {
    let Some(init) = m.init().next else { return 0 };
    let mut checked = 0usize;
    let mut seen: HashSet<State> = HashSet::new();
    let mut queue = VecDeque::from([init]);
    let mut perm = Vec::new();
    let mut actions = Vec::new();
    while let Some(s) = queue.pop_front() {
        if seen.len() >= STATES_PER_SPEC || !seen.insert(s.clone()) {
            continue;
        }
        assert_eq!(roundtrip(m, &s), s, "{label}: raw state");
        let mut c = s.clone();
        m.canonical_form(&mut c, true, &mut perm);
        assert_eq!(roundtrip(m, &c), c, "{label}: canonical state");
        checked += 1;
        actions.clear();
        m.actions(&s, &mut actions);
        for &a in &actions {
            if let Some(n) = m.step(&s, a).next {
                queue.push_back(n);
            }
        }
    }
    checked
}

/// Per-object flags are packed 32 to a word: protocols with more barriers and buffers than one
/// word holds (31 to 65 of each, around the word edges), with and without the async proxy,
/// give back every state they reach.
#[test]
fn packing_keeps_states_with_more_objects_than_a_flag_word_holds() {
    for n in [31usize, 32, 33, 64, 65] {
        for proxy in [false, true] {
            let fence = if proxy { "  fence_proxy_async()\n" } else { "" };
            let src = format!(
                "protocol wide\nbarrier b[{n}] count 1\nbuffer d[{n}] bytes 4\nrole t[1] {{\n  for i in 0..{n} {{\n    write(d[i], 1)\n{fence}    arrive(b[i])\n  }}\n}}\n"
            );
            let ast = phasecheck_model::lang::parse(&src).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
            phasecheck_model::lang::check(&ast).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
            let m = Model::new(phasecheck_model::program::lower::lower(&ast, &[]).expect("lowers"));
            let checked = roundtrip_reached(&m, &format!("{n} objects, proxy {proxy}"));
            assert!(checked > n, "{n} objects, proxy {proxy}: only {checked} states");
        }
    }
}

/// A state carries a component per thread, barrier, buffer and var, four for copies, engines,
/// their knowledge and commit logs, and one more only for what the protocol uses: named
/// barriers (or the cluster barrier) and the async proxy. A component a protocol never uses
/// would cost every stored state its id (bytes per state is a figure users read).
#[test]
fn a_state_has_a_named_barrier_component_only_when_the_protocol_uses_named_barriers() {
    let count = |src: &str| model_of(src).component_count();
    let plain = "protocol p\nbarrier b count 2\nrole w[2] {\n  arrive_and_wait(b)\n}\n";
    let named = "protocol p\nbarrier b count 2\nrole w[2] {\n  arrive_and_wait(b)\n  bar_sync(1, 64)\n}\n";
    // 2 threads + 1 barrier + 4.
    assert_eq!(count(plain), 7);
    assert_eq!(count(named), 8);
}

/// A protocol's model from its source (parsed, checked, lowered).
fn model_of(src: &str) -> Model {
    let ast = phasecheck_model::lang::parse(src).unwrap();
    phasecheck_model::lang::check(&ast).unwrap();
    Model::new(phasecheck_model::program::lower::lower(&ast, &[]).unwrap())
}

/// Walk one path from the initial state, taking the first enabled action `take` accepts, each
/// step from the state as the search stores it (packed, then unpacked): every state must give
/// itself back (`first` compares a part before the whole, for a readable failure) and no step
/// may raise a violation. Returns the last state and the steps taken.
fn walk_one_path(m: &Model, take: impl Fn(&phasecheck_model::rt::Action) -> bool, first: impl Fn(&State, &State)) -> (State, usize) {
    let mut s = m.init().next.expect("initial state");
    let mut steps = 0usize;
    let mut actions = Vec::new();
    loop {
        let back = roundtrip(m, &s);
        first(&back, &s);
        assert_eq!(back, s, "after {steps} steps");
        actions.clear();
        m.actions(&s, &mut actions);
        let Some(&a) = actions.iter().find(|a| take(a)) else { break };
        let out = m.step(&back, a);
        assert!(out.violations.is_empty(), "after {steps} steps: {:?}", out.violations);
        let Some(n) = out.next else { break };
        s = n;
        steps += 1;
    }
    (s, steps)
}

/// A cp.async copy's group age stops growing where the packing's field ends (groups that old are
/// all older than any `cp_async_wait_group` can name): a copy still in flight after 4,100
/// `cp_async_commit_group`s gives itself back at every step, and the wait after them lands it.
#[test]
fn packing_keeps_a_cp_async_copy_committed_more_groups_ago_than_its_age_field_counts() {
    let src = "protocol p\nbuffer d bytes 16\nrole t[1] {\n  cp_async(d)\n  for i in 0..4100 {\n    cp_async_commit_group()\n  }\n  cp_async_wait_group(0)\n  read(d)\n}\n";
    let m = model_of(src);
    // The thread runs alone (the copy is never landed by its own step): one path of states.
    let (s, steps) = walk_one_path(&m, |a| matches!(a, phasecheck_model::rt::Action::Thread(_)), |_, _| {});
    assert!(steps > 4100, "only {steps} steps");
    assert!(s.all_done() && s.copies.is_empty(), "the wait left the copy in flight");
}

/// A warpgroup of one agent per lane records which of its agents waited for an MMA's operand
/// reads in a 64-bit mask (up to 64 agents: 4 warps of 16): the states its waits go through,
/// agent 32 and past (the mask's upper word), give themselves back, and the entry is dropped
/// once the whole warpgroup has waited.
#[test]
fn packing_keeps_which_agents_of_a_full_warpgroup_waited_for_its_mma() {
    let src = "protocol p\nwarp_size 16\nbuffer a bytes 16\nrole mma warpgroups 1 {\n  warpgroup_mma(a)\n  warpgroup_wait(0)\n}\n";
    let m = model_of(src);
    let (s, steps) = walk_one_path(&m, |_| true, |back, s| assert_eq!(back.proxy.reads, s.proxy.reads));
    assert!(steps >= 128, "only {steps} steps");
    assert!(
        s.all_done() && s.proxy.reads.is_empty(),
        "the MMA's reads outlived the warpgroup's waits: {:?}",
        s.proxy.reads
    );
}

/// `same_part` (which components of a successor the engine may skip repacking) tells a
/// component that is the same from one that changed: for every step of a bounded walk over
/// every library spec, it is true exactly where the component packs to the same words.
#[test]
fn same_part_is_true_exactly_where_a_component_packs_the_same() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let (mut same, mut changed) = (0usize, 0usize);
    for f in expand(&[root]).expect("specs folder") {
        let m = Model::new(load(&f, &[]).unwrap_or_else(|e| panic!("{e}")).proto);
        let Some(init) = m.init().next else { continue };
        let mut seen: HashSet<State> = HashSet::new();
        let mut queue = VecDeque::from([init]);
        let mut actions = Vec::new();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        while let Some(s) = queue.pop_front() {
            if seen.len() >= 200 || !seen.insert(s.clone()) {
                continue;
            }
            actions.clear();
            m.actions(&s, &mut actions);
            for &act in &actions {
                let Some(n) = m.step(&s, act).next else { continue };
                for p in 0..m.component_count() {
                    a.clear();
                    b.clear();
                    m.pack_part(&s, p, &mut a);
                    m.pack_part(&n, p, &mut b);
                    assert_eq!(m.same_part(&s, &n, p), a == b, "{}: component {p}", f.display());
                    if a == b {
                        same += 1
                    } else {
                        changed += 1
                    }
                }
                queue.push_back(n);
            }
        }
    }
    assert!(same > 1000 && changed > 1000, "{same} same, {changed} changed");
}

/// A protocol that never uses the async proxy packs no proxy component, and its states unpack
/// with the proxy's per-barrier flags cleared, however many barriers there are: around the edge
/// of eight 32-bit flag words (255 to 265 barriers), every state reached gives itself back.
#[test]
fn packing_keeps_states_of_protocols_without_the_async_proxy_whatever_their_barrier_count() {
    for n in [255usize, 256, 257, 264, 265] {
        let last = n - 1;
        let src = format!(
            "protocol wide\nbarrier b[{n}] count 1\nrole t[1] {{\n  arrive(b[0])\n  arrive(b[{last}])\n  wait_parity(b[{last}], 0)\n}}\n"
        );
        let ast = phasecheck_model::lang::parse(&src).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
        phasecheck_model::lang::check(&ast).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
        let m = Model::new(phasecheck_model::program::lower::lower(&ast, &[]).expect("lowers"));
        let checked = roundtrip_reached(&m, &format!("{n} barriers"));
        assert!(checked >= 3, "{n} barriers: only {checked} states");
    }
}

/// A copy of a whole buffer packs without its byte range (so that states of protocols without
/// partial copies stay small, and bytes per state is a figure users read): with the copy in
/// flight, the copies' component of the state is smaller than for a copy of half the buffer, and
/// both give themselves back.
#[test]
fn a_whole_buffer_copy_packs_smaller_than_a_copy_of_part_of_it() {
    // The words of the copies' component (after one per thread, barrier and buffer) once the
    // copy is in flight.
    let copy_words = |bytes: u32| {
        let src = format!("protocol p\nbarrier full count 1\nbuffer d bytes 64\nrole t[1] {{\n  arrive_expect_tx(full, {bytes})\n  copy_async(d, full, offset = 0, bytes = {bytes})\n  wait_parity(full, 0)\n}}\n");
        let ast = phasecheck_model::lang::parse(&src).unwrap();
        phasecheck_model::lang::check(&ast).unwrap();
        let m = Model::new(phasecheck_model::program::lower::lower(&ast, &[]).unwrap());
        let mut s = m.init().next.unwrap();
        let mut en = Vec::new();
        while s.copies.is_empty() {
            en.clear();
            m.actions(&s, &mut en);
            s = m.step(&s, en[0]).next.unwrap();
        }
        assert_eq!(roundtrip(&m, &s), s);
        let (mut words, mut ends) = (Vec::new(), Vec::new());
        m.pack_state(&s, &mut words, &mut ends);
        (ends[3] - ends[2]) as usize
    };
    let (whole, half) = (copy_words(64), copy_words(32));
    assert!(whole < half, "whole {whole} words, half {half}");
}
