//! The import round trip: a generated protocol, written as a plain kernel (`emit-cuda --plain`),
//! compiled by NVRTC for sm_90a and imported back from its PTX, must be checked to the same
//! verdict with the same violation kinds as the spec it came from. A disagreement is a bug in the
//! plain emitter or in the importer (docs/import.md, "The round trip").
//!
//! Without NVRTC (`source gpu-conformance/ci/setup-nvrtc.sh`) the test prints a SKIPPED line and
//! passes, unless `CI` is set, where a missing NVRTC fails it.

use phasecheck_gpu::codegen::generate_plain;
use phasecheck_verifier::api::{check_with, parse_spec, CheckOptions, Verdict};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// The mistake a generated ring carries, if any.
#[derive(Clone, Copy, Debug)]
enum Bug {
    None,
    /// The consumer never flips its parity on `full`.
    ConsumerParity,
    /// The producer waits on `empty` with the phase it should not.
    ProducerParity,
    /// `expect_tx` announces 16 bytes more, or less, than the copy brings.
    TxBytes(i64),
    /// `full` counts two arrivals; the producer makes one.
    FullCount,
    /// `empty` counts one arrival more than there are consumers.
    EmptyCount,
    /// The consumer reads without waiting on `full`.
    ConsumerNoWait,
    /// The producer refills a slot without waiting on `empty`.
    ProducerNoWait,
    /// The barriers' `init`s are not followed by `fence_mbarrier_init()` (with `manual`).
    NoInitFence,
    /// `empty` is never initialised (with `manual`).
    NoInit,
    /// The consumer releases the slot before it reads it.
    EarlyRelease,
}

/// A producer/consumer ring, as the `.phase` text a user would write.
#[derive(Clone, Debug)]
struct Ring {
    stages: i64,
    iters: i64,
    consumers: u32,
    bytes: i64,
    /// How the producer fills a slot: a bulk copy announced by `arrive_expect_tx` (0), by
    /// `expect_tx` then `arrive` (1), its own `write` then `arrive` (2), or two copies of half
    /// the slot each (`offset`, `bytes`) announced together (3).
    fill: u8,
    /// The producer waits on `empty` in every round, from parity 1 (which a fresh barrier
    /// passes at once: DeepGEMM's and CUTLASS's producer start state), not from round STAGES.
    start_one: bool,
    /// The barriers are `manual_init`: the producer inits them, fences, and every role meets at
    /// a `syncthreads` (else they are ready before the roles run).
    manual: bool,
    /// Consumer 0 of two leaves `empty` with `arrive_and_drop` in its last round (the other
    /// keeps the count from falling to 0, itself a count-range violation), so the two consumers'
    /// paths differ by `tid`.
    drop_last: bool,
    /// The consumers meet after each read on a barrier of their own, each waiting on the token
    /// its arrival returned.
    meet: bool,
    bug: Bug,
}

impl Ring {
    fn spec(&self) -> String {
        let Ring {
            stages,
            iters,
            consumers,
            bytes,
            fill,
            start_one,
            manual,
            drop_last,
            meet,
            bug,
        } = self.clone();
        let full_count = if matches!(bug, Bug::FullCount) { 2 } else { 1 };
        let empty_count = consumers + matches!(bug, Bug::EmptyCount) as u32;
        let tx = match bug {
            Bug::TxBytes(d) => bytes + d,
            _ => bytes,
        };
        let parity = if matches!(bug, Bug::ProducerParity) {
            "(i / STAGES) % 2"
        } else {
            "(i / STAGES + 1) % 2"
        };
        let producer_wait = match (bug, start_one) {
            (Bug::ProducerNoWait, _) => String::new(),
            (_, true) => format!("    wait_parity(empty[s], {parity})\n"),
            (_, false) => format!("    if i >= STAGES {{ wait_parity(empty[s], {parity}) }}\n"),
        };
        let half = bytes / 2;
        let fill_text = match fill {
            0 => format!("    arrive_expect_tx(full[s], {tx})\n    copy_async(slot[s], full[s])\n"),
            1 => format!("    expect_tx(full[s], {tx})\n    arrive(full[s])\n    copy_async(slot[s], full[s])\n"),
            2 => "    write(slot[s], i)\n    arrive(full[s])\n".into(),
            _ => format!(
                "    arrive_expect_tx(full[s], {tx})\n    copy_async(slot[s], full[s], offset = 0, bytes = {half})\n    copy_async(slot[s], full[s], offset = {half}, bytes = {half})\n"
            ),
        };
        let (decl, setup, sync) = if manual {
            let fence = if matches!(bug, Bug::NoInitFence) {
                ""
            } else {
                "  fence_mbarrier_init()\n"
            };
            (
                " manual_init",
                format!(
                    "  for k in 0..STAGES {{\n    init(full[k])\n{}  }}\n{fence}  syncthreads\n",
                    if matches!(bug, Bug::NoInit) { "" } else { "    init(empty[k])\n" }
                ),
                "  syncthreads\n",
            )
        } else {
            ("", String::new(), "")
        };
        let release = if matches!(bug, Bug::EarlyRelease) {
            ""
        } else if drop_last {
            "    if i == ITERS - 1 && tid == 0 { arrive_and_drop(empty[s]) } else { arrive(empty[s]) }\n"
        } else {
            "    arrive(empty[s])\n"
        };
        let consumer_wait = match bug {
            Bug::ConsumerNoWait => String::new(),
            Bug::ConsumerParity => "    wait_parity(full[s], 0)\n".into(),
            _ => "    wait_parity(full[s], (i / STAGES) % 2)\n".into(),
        };
        let early = if matches!(bug, Bug::EarlyRelease) {
            "    arrive(empty[s])\n"
        } else {
            ""
        };
        let (meet_decl, meet_text) = if meet {
            (
                format!("barrier meet count {consumers}\n"),
                "    let t = arrive(meet)\n    wait(meet, t)\n",
            )
        } else {
            (String::new(), "")
        };
        format!(
            "protocol ring\nparam STAGES = {stages}\nparam ITERS = {iters}\n\n\
             barrier full[STAGES] count {full_count}{decl}\nbarrier empty[STAGES] count {empty_count}{decl}\n\
             {meet_decl}buffer slot[STAGES] bytes {bytes}\n\n\
             role producer[1] {{\n{setup}  for i in 0..ITERS {{\n    let s = i % STAGES\n{producer_wait}{fill_text}  }}\n}}\n\n\
             role consumer[{consumers}] {{\n{sync}  for i in 0..ITERS {{\n    let s = i % STAGES\n{consumer_wait}{early}    read(slot[s])\n{meet_text}{release}  }}\n}}\n"
        )
    }
}

fn bug() -> impl Strategy<Value = Bug> {
    prop_oneof![
        3 => Just(Bug::None),
        1 => Just(Bug::ConsumerParity),
        1 => Just(Bug::ProducerParity),
        1 => prop_oneof![Just(16i64), Just(-16i64)].prop_map(Bug::TxBytes),
        1 => Just(Bug::FullCount),
        1 => Just(Bug::EmptyCount),
        1 => Just(Bug::ConsumerNoWait),
        1 => Just(Bug::ProducerNoWait),
        1 => Just(Bug::NoInitFence),
        1 => Just(Bug::NoInit),
        1 => Just(Bug::EarlyRelease),
    ]
}

fn ring() -> impl Strategy<Value = Ring> {
    (
        (1i64..=3, 1i64..=5, 1u32..=2, prop_oneof![Just(16i64), Just(32i64)], 0u8..=3),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), bug()),
    )
        .prop_map(
            |((stages, iters, consumers, bytes, fill), (start_one, manual, drop_last, meet, bug))| {
                // halves of a bulk copy are whole 16-byte chunks
                let bytes = if fill == 3 { 32 } else { bytes };
                let bug = match (fill, manual, bug) {
                    // a written slot has no tx bytes to get wrong
                    (2, _, Bug::TxBytes(_)) => Bug::None,
                    // ready-made barriers have no init to fence
                    (_, false, Bug::NoInitFence | Bug::NoInit) => Bug::None,
                    (_, _, b) => b,
                };
                let drop_last = drop_last && consumers == 2;
                Ring {
                    stages,
                    iters,
                    consumers,
                    bytes,
                    fill,
                    start_one,
                    manual,
                    drop_last,
                    meet,
                    bug,
                }
            },
        )
}

/// The verdict and the kinds of a spec, every kind explored (no allowance past a violation).
fn verdict(name: &str, text: &str) -> (Verdict, BTreeSet<&'static str>) {
    let loaded = parse_spec(name, text, &[]).unwrap_or_else(|e| panic!("{name} does not parse:\n{e}\n{text}"));
    let c = check_with(
        &loaded,
        &CheckOptions {
            max_seconds: Some(20.0),
            ..CheckOptions::default()
        },
    );
    // a search stopped at its bound reports what it found so far: say so in the verdict
    let verdict = if c.report.bound.is_some() {
        Verdict::Incomplete
    } else {
        c.verdict()
    };
    (verdict, c.kinds().into_iter().collect())
}

/// The spec text imported back from the plain kernel of `spec`.
fn round_trip(spec: &str) -> Result<String, String> {
    let loaded = parse_spec("ring.phase", spec, &[]).map_err(|e| format!("the generated spec does not parse:\n{e}"))?;
    let cu = generate_plain(&loaded.proto, &loaded.source).map_err(|e| format!("emit-cuda --plain: {e}"))?;
    let ptx = phasecheck_gpu::sys::compile_ptx(&cu, "ring.cu", "sm_90a", &[], &["--std=c++17".to_string(), "-lineinfo".to_string()])
        .map_err(|e| format!("NVRTC: {e}\n{cu}"))?;
    let opts = phasecheck_import::Options {
        ptx_name: "ring.ptx".into(),
        ..Default::default()
    };
    let imported = phasecheck_import::import(&ptx, &opts).map_err(|e| format!("import: {}\n{cu}", e.render("ring.ptx")))?;
    if imported.facts.unresolved_count() > 0 {
        let open: Vec<String> = imported
            .facts
            .list()
            .filter(|f| matches!(f.status, phasecheck_import::facts::Status::Unresolved(_)))
            .map(|f| format!("{} {:?}", imported.origin(f), f.status))
            .collect();
        return Err(format!("import left {} unresolved:\n{}\n{cu}", open.len(), open.join("\n")));
    }
    Ok(imported.spec)
}

fn nvrtc_or_skip() -> bool {
    if phasecheck_gpu::nvrtc::available() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("import_roundtrip: NVRTC is not available and CI is set (source gpu-conformance/ci/setup-nvrtc.sh)");
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| println!("SKIPPED import_roundtrip: NVRTC is not available (source gpu-conformance/ci/setup-nvrtc.sh)"));
    false
}

proptest! {
    // 40 cases: about 5 s here (NVRTC takes ~0.1 s a kernel); PROPTEST_CASES asks for more.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(40),
        ..ProptestConfig::default()
    })]

    #[test]
    fn import_of_the_emitted_kernel_keeps_verdict_and_kinds(r in ring()) {
        if !nvrtc_or_skip() {
            return Ok(());
        }
        let spec = r.spec();
        let (v0, k0) = verdict("ring.phase", &spec);
        prop_assume!(v0 != Verdict::Incomplete);
        let back = round_trip(&spec).map_err(TestCaseError::fail)?;
        let (v1, k1) = verdict("imported.phase", &back);
        if std::env::var_os("ROUNDTRIP_LOG").is_some() {
            eprintln!("{:?} {:?} {:?} | {:?} {:?}", r, v0, k0, v1, k1);
        }
        prop_assert_eq!(
            (v0, &k0),
            (v1, &k1),
            "{:?}\n--- spec\n{}\n--- imported\n{}",
            r,
            spec,
            back
        );
    }
}

/// What the plain emitter does not cover it refuses, naming what and where: a uniform role, an
/// `expect` whose version the kernel cannot carry, a statement without a plain form.
#[test]
fn plain_emission_refuses_what_it_cannot_express_with_the_reason() {
    let refusal = |text: &str| {
        let loaded = parse_spec("r.phase", text, &[]).unwrap();
        generate_plain(&loaded.proto, &loaded.source).unwrap_err().to_string()
    };
    let uniform = refusal("protocol u\nbarrier b count 1\nrole w warps 1 uniform {\n  arrive(b)\n}\n");
    assert!(uniform.contains("role w is uniform"), "{uniform}");
    let expect = refusal(
        "protocol e\nbarrier b count 1\nbuffer d bytes 16\nrole p[1] {\n  write(d, 1)\n  arrive(b)\n}\n\
         role c[1] {\n  wait_parity(b, 0)\n  read(d, expect = 1)\n}\n",
    );
    assert!(expect.contains("line 10: a read with `expect`"), "{expect}");
    let elect = refusal("protocol x\nbarrier b count 1\nrole w[1] {\n  let e = elect()\n  arrive(b)\n}\n");
    assert!(elect.contains("line 4: elect() has no plain form"), "{elect}");
}
