//! Counters and DSMEM atomics (`counter`, `atomic_add`, `read_counter`): what the
//! `specs/hopper/cluster_counter_*` and histogram expect lines cannot say. Atomics never race each
//! other, whichever CTA makes them; a plain read races every atomic it is not ordered after, in
//! either order; the value is the sum; a peer that exited is `lifetime`;
//! a uniform agent adds once per lane; the reduced search finds the kinds of the unreduced one.

mod common;
use common::{code, phasecheck, text};
use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::Model;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, CheckOptions, Verdict};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// `phasecheck check` of `source` written to a fresh file: (exit status, stdout + stderr).
fn run_check(name: &str, source: &str) -> (i32, String) {
    common::check_source("atomics", name, source)
}

fn verdict(name: &str, source: &str) -> String {
    let (c, out) = run_check(name, source);
    assert!(c == 0 || c == 1, "{name}: {out}");
    out.lines().find(|l| l.starts_with("verdict:")).unwrap_or_default().to_string()
}

/// A cluster of 2 CTAs of `threads` threads each running `body`, with one counter `c` (and a
/// counter array `bins[2]`) in every CTA.
fn cluster_spec(threads: u32, body: &str) -> String {
    format!("protocol p\ncluster 2\ncounter c\ncounter bins[2]\nrole w[{threads}] {{\n  cluster_sync()\n{body}\n  cluster_sync()\n}}\n")
}

#[test]
fn atomics_of_every_thread_of_both_ctas_never_race_and_sum_up() {
    // Four threads, two per CTA, add into CTA 0's counter, one of them by its local form.
    let body = "  if cta == 0 && tid == 0 { atomic_add(c, 5) } else { atomic_add(c, 1, cta = 0) }\n  cluster_sync()\n  if cta == 0 { read_counter(c, expect = 8) }";
    assert_eq!(verdict("sum", &cluster_spec(2, body)), "verdict: holds");
    // The same total read by the peer, through DSMEM.
    let body = "  atomic_add(c, 2, cta = 0)\n  cluster_sync()\n  read_counter(c, cta = 0, expect = 8)";
    assert_eq!(verdict("remote_read", &cluster_spec(2, body)), "verdict: holds");
    // Another value than the sum is a stale read, not a race.
    let body = "  atomic_add(c, 1, cta = 0)\n  cluster_sync()\n  if cta == 0 { read_counter(c, expect = 3) }";
    assert_eq!(verdict("wrong_total", &cluster_spec(2, body)), "verdict: violated (stale-read)");
}

#[test]
fn a_plain_read_races_the_atomics_it_is_not_ordered_after_in_either_order() {
    // CTA 1 adds, CTA 0 reads without a barrier between: the read may come first (the add then
    // races the read) or second (the read races the add); both are data races.
    let body = "  if cta == 1 { atomic_add(c, 1, cta = 0) } else { read_counter(c) }";
    let (_, out) = run_check("either_order", &cluster_spec(1, body));
    assert!(out.contains("verdict: violated (data-race)"), "{out}");
    // The trace says what an add left and what a read saw as values, not versions.
    assert!(
        out.contains("adds to cta0.c, which now holds 1") || out.contains("reads cta0.c = "),
        "{out}"
    );
    // The reader's own earlier add does not race its read (program order).
    let body = "  if cta == 0 { atomic_add(c, 1)\n  read_counter(c, expect = 1) }";
    assert_eq!(verdict("own_add", &cluster_spec(1, body)), "verdict: holds");
    // A read before the peer's add, ordered before it by the cluster barrier, does not race.
    let body = "  if cta == 0 { read_counter(c, expect = 0) }\n  cluster_sync()\n  if cta == 1 { atomic_add(c, 1, cta = 0) }";
    assert_eq!(verdict("read_then_add", &cluster_spec(1, body)), "verdict: holds");
    // Counters are told apart: the peer's adds to bins[1] do not race a read of bins[0].
    let body = "  if cta == 1 { atomic_add(bins[1], 1, cta = 0) } else { read_counter(bins[0], expect = 0) }";
    assert_eq!(verdict("other_bin", &cluster_spec(1, body)), "verdict: holds");
}

#[test]
fn an_atomic_on_a_peer_that_exited_is_lifetime() {
    let src = "protocol p\ncluster 2\ncounter c\nrole w[1] {\n  cluster_sync()\n  if cta == 1 { atomic_add(c, 1, cta = 0) }\n}\n";
    let (_, out) = run_check("exited", src);
    assert!(out.contains("verdict: violated (lifetime)"), "{out}");
    assert!(out.contains("adds atomically to a counter in the shared memory of CTA 0"), "{out}");
    // Kept alive by a closing cluster barrier: holds.
    let alive = "protocol p\ncluster 2\ncounter c\nrole w[1] {\n  cluster_sync()\n  if cta == 1 { atomic_add(c, 1, cta = 0) }\n  cluster_sync()\n}\n";
    assert_eq!(verdict("alive", alive), "verdict: holds");
}

#[test]
fn a_uniform_agent_adds_once_per_lane() {
    let src = |n: u32| {
        format!("protocol p\nwarp_size 4\ncounter c\nrole w warps 2 uniform {{\n  atomic_add(c, 1)\n  syncthreads\n  read_counter(c, expect = {n})\n}}\n")
    };
    assert_eq!(verdict("per_lane", &src(8)), "verdict: holds");
    assert_eq!(verdict("per_agent", &src(2)), "verdict: violated (stale-read)");
    // From an elected block, one add per warp.
    let elected = "protocol p\nwarp_size 4\ncounter c\nrole w warps 2 uniform {\n  let e = elect()\n  if e == 1 { atomic_add(c, 1) }\n  syncthreads\n  read_counter(c, expect = 2)\n}\n";
    assert_eq!(verdict("elected", elected), "verdict: holds");
}

#[test]
fn the_reference_runtime_refuses_counters_by_name() {
    let dir = std::env::temp_dir().join(format!("phasecheck-atomics-run-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("counter.phase");
    std::fs::write(
        &f,
        "protocol p\ncounter c\nrole w[2] {\n  atomic_add(c, 1)\n  syncthreads\n  read_counter(c, expect = 2)\n}\n",
    )
    .unwrap();
    let o = phasecheck(&["run", f.to_str().unwrap(), "--cpu", "--runs", "5"]);
    let out = format!("{}{}", text(&o.stdout), text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(code(&o), 0, "{out}");
    assert!(out.contains("does not model counters"), "{out}");
}

/// Kinds found, or `None` when the search did not finish within its bound.
fn kinds(src: &str, por: bool, symmetry: bool) -> Option<BTreeSet<ViolationKind>> {
    let proto = lower(&lang::parse(src).unwrap(), &[]).unwrap_or_else(|d| panic!("{d:?}\n{src}"));
    let model = Model::new(proto);
    let opts = CheckOptions {
        max_states: Some(30_000),
        self_check: true,
        symmetry,
        por,
        threads: 1,
        ..CheckOptions::default()
    };
    let r = check(&model, &opts);
    assert_ne!(r.verdict, Verdict::InternalError, "{src}");
    r.bound.is_none().then(|| r.violations.iter().map(|v| v.kind).collect())
}

/// One CTA of adders and a reader, with the mistakes users make with counters: a release before
/// the adds (the read is then not ordered after them), a read of the counter before an adder's
/// own adds (which races the other adders), an adder that skips its release, a wrong total. The reduction applies
/// (no cluster), and counts an atomic as a write of its counter.
fn counters(seed: u64) -> String {
    let mut x = seed;
    let mut pick = |n: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let adders = 1 + pick(3);
    let rounds = 1 + pick(2);
    let bins = 1 + pick(2);
    let peek = pick(4) == 0;
    let release = pick(5);
    let off = pick(4) == 0;
    let total = adders * rounds + if off { 1 } else { 0 };
    let peek = if peek { "  read_counter(c[0])\n" } else { "" };
    let (early, arrive) = match release {
        0 => ("", ""),
        1 => ("", "  if tid > 0 { arrive(done) }\n"),
        2 => ("  arrive(done)\n", ""),
        _ => ("", "  arrive(done)\n"),
    };
    format!(
        "protocol g\nbarrier done count {adders}\ncounter c[{bins}]\n\
         role adder[{adders}] {{\n{peek}{early}  for r in 0..{rounds} {{\n    atomic_add(c[r % {bins}], 1)\n  }}\n{arrive}}}\n\
         role reader[1] {{\n  wait_parity(done, 0)\n  read_counter(c[0], expect = {})\n}}\n",
        if bins == 1 {
            total
        } else {
            adders * rounds.div_ceil(2) + if off { 1 } else { 0 }
        }
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Law: on counters added to by several threads and read after (or not after) a barrier,
    /// the reduction keeps the kinds of the unreduced search.
    #[test]
    fn reduction_keeps_the_kinds_of_counter_protocols(seed in any::<u64>()) {
        let src = counters(seed);
        let model = Model::new(lower(&lang::parse(&src).unwrap(), &[]).unwrap());
        prop_assert!(model.por.applicable, "the reduction does not apply to\n{}", src);
        let plain = kinds(&src, false, false);
        prop_assume!(plain.is_some());
        let por = kinds(&src, true, false);
        let both = kinds(&src, true, true);
        prop_assert_eq!(&plain, &por, "POR alone\n{}", src);
        prop_assert_eq!(&plain, &both, "POR with symmetry\n{}", src);
    }
}

/// The generator reaches every verdict the law is about: a protocol that holds, a race between
/// an add and a read, and a stale total (so the law above compares searches that find things).
#[test]
fn the_counter_generator_reaches_holds_races_and_stale_totals() {
    let mut seen = BTreeSet::new();
    let mut holds = false;
    for seed in 0..200u64 {
        match kinds(&counters(seed), false, false) {
            Some(k) if k.is_empty() => holds = true,
            Some(k) => seen.extend(k),
            None => {}
        }
    }
    assert!(holds, "no generated protocol holds");
    assert!(seen.contains(&ViolationKind::DataRace), "{seen:?}");
    assert!(seen.contains(&ViolationKind::StaleRead), "{seen:?}");
}

/// The reduction applies to the cluster specs (remote atomics are operations on the target
/// CTA's counter, docs/model.md, "Cluster scope") and keeps their verdicts: the law above covers
/// counters of one CTA, these the remote ones.
#[test]
fn the_cluster_counter_specs_keep_their_verdicts_under_the_reduction() {
    for f in [
        "specs/hopper/cluster_counter_read_before_peer_atomics.phase",
        "specs/hopper/cuda_guide_cluster_histogram_atomics.phase",
    ] {
        let reduced = text(&phasecheck(&["check", f]).stdout);
        let full = text(&phasecheck(&["check", f, "--no-por"]).stdout);
        assert!(!reduced.contains("partial-order: off"), "{f}: {reduced}");
        let verdict = |out: &str| out.lines().find(|l| l.starts_with("verdict:")).map(str::to_string);
        assert_eq!(verdict(&reduced), verdict(&full), "{f}");
        assert!(verdict(&reduced).is_some(), "{f}: {reduced}");
    }
}
