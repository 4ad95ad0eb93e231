//! The partial-order reduction on the protocols it is built for: K-stage producer/consumer rings
//! (TMA-style copies or plain writes, parity or token waits, several consumer roles), each with
//! random mistakes of the kinds users make (a wrong or constant parity, a missing wait or arrive,
//! an extra arrive, a count for one consumer, a write instead of a copy, a byte count off, an
//! early `arrive_and_drop`, a shared var that steers a branch). The reduction cuts a thread's
//! future at the first wait that cannot return while the seed stands still, counting arrivals
//! (docs/model.md, "Partial-order reduction"): these rings are where that cut matters, and where
//! a wrong count would lose a kind.

// The shared CLI-test module also sets the binary's allocator (mimalloc) for the searches here.
mod common;

use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::Model;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, CheckOptions, Verdict};
use proptest::prelude::*;
use std::collections::BTreeSet;

#[derive(Clone, Debug)]
struct Ring {
    stages: u32,
    iters: u32,
    consumers: u32,
    /// A second consumer role (one thread) with the same loop.
    second_role: bool,
    /// `empty`'s count: the consumers (0), one fewer (1), one more (2).
    empty_count: u8,
    producer: Producer,
    consumer: Consumer,
}

#[derive(Clone, Debug)]
struct Producer {
    /// 0: right parity; 1: flipped; 2: always 0; 3: no wait.
    wait: u8,
    /// 0: arrive_expect_tx + copy_async; 1: a byte count off; 2: write + arrive (no copy);
    /// 3: copy_async then expect_tx (libcu++ order) and an arrive.
    fill: u8,
    /// The wait for the slot's release comes after the fill instead of before it.
    late_wait: bool,
}

#[derive(Clone, Debug)]
struct Consumer {
    /// 0: right parity; 1: flipped; 2: always 0; 3: no wait; 4: steered by a shared var.
    wait: u8,
    /// 0: arrive after the read; 1: before it; 2: no arrive; 3: twice; 4: token arrive, then a
    /// wait on the token's phase of `empty` (arrive_and_wait style) after the read.
    release: u8,
    /// The last iteration ends with `arrive_and_drop` and `return`.
    drop_last: bool,
}

fn arb_ring() -> impl Strategy<Value = Ring> {
    (
        (1u32..=3, 1u32..=4, 1u32..=2, any::<bool>(), 0u8..=2),
        (0u8..=3, 0u8..=3, any::<bool>()),
        (0u8..=4, 0u8..=4, any::<bool>()),
    )
        .prop_map(
            |((stages, iters, consumers, second_role, empty_count), (pw, fill, late_wait), (cw, release, drop_last))| Ring {
                stages,
                iters,
                consumers,
                second_role,
                // Mistakes are rarer than the right protocol: half the rings get the right count.
                empty_count: if empty_count == 2 && consumers > 1 {
                    1
                } else {
                    empty_count % 2 * 2
                },
                producer: Producer { wait: pw, fill, late_wait },
                consumer: Consumer {
                    wait: cw,
                    release,
                    drop_last,
                },
            },
        )
}

fn parity(kind: u8, producer: bool) -> String {
    let right = if producer { "(i / STAGES + 1) % 2" } else { "(i / STAGES) % 2" };
    match kind {
        0 => right.to_string(),
        1 => if producer { "(i / STAGES) % 2" } else { "(i / STAGES + 1) % 2" }.to_string(),
        _ => "0".to_string(),
    }
}

fn render(r: &Ring) -> String {
    let mut out = String::new();
    let consumers_total = if r.second_role {
        "consumer.count + other.count"
    } else {
        "consumer.count"
    };
    let empty_count = match r.empty_count {
        0 => consumers_total.to_string(),
        1 => format!("{consumers_total} - 1"),
        _ => format!("{consumers_total} + 1"),
    };
    out += &format!(
        "protocol ring\nexpect holds\nparam STAGES = {}\nparam ITERS = {}\nparam BYTES = 64\n\n",
        r.stages, r.iters
    );
    out += &format!(
        "barrier full[STAGES] count 1\nbarrier empty[STAGES] count {empty_count}\nbuffer slot[STAGES] bytes BYTES\nvar go = 1\n\n"
    );
    // Producer.
    let p = &r.producer;
    let wait = if p.wait == 3 {
        String::new()
    } else {
        format!("    if i >= STAGES {{ wait_parity(empty[s], {}) }}\n", parity(p.wait, true))
    };
    let fill = match p.fill {
        0 => "    arrive_expect_tx(full[s], BYTES)\n    copy_async(slot[s], full[s], version = i)\n".to_string(),
        1 => "    arrive_expect_tx(full[s], BYTES / 2)\n    copy_async(slot[s], full[s], version = i)\n".to_string(),
        2 => "    write(slot[s], i)\n    arrive(full[s])\n".to_string(),
        _ => "    memcpy_async(slot[s], full[s], version = i)\n    arrive(full[s])\n".to_string(),
    };
    let body = if p.late_wait {
        format!("{fill}{wait}")
    } else {
        format!("{wait}{fill}")
    };
    out += &format!("role producer[1] {{\n  for i in 0..ITERS {{\n    let s = i % STAGES\n{body}  }}\n}}\n\n");
    // Consumers.
    let c = &r.consumer;
    let wait = match c.wait {
        3 => String::new(),
        4 => "    let g = go\n    if g == 1 { wait_parity(full[s], (i / STAGES) % 2) }\n".to_string(),
        k => format!("    wait_parity(full[s], {})\n", parity(k, false)),
    };
    let read = "    read(slot[s], expect = i)\n";
    let release = match c.release {
        0 => format!("{read}    arrive(empty[s])\n"),
        1 => format!("    arrive(empty[s])\n{read}"),
        2 => read.to_string(),
        3 => format!("{read}    arrive(empty[s])\n    arrive(empty[s])\n"),
        _ => format!("{read}    let t = arrive(empty[s])\n    wait(empty[s], t)\n"),
    };
    let drop = if c.drop_last {
        "    if i == ITERS - 1 { arrive_and_drop(empty[s])\n      return }\n"
    } else {
        ""
    };
    let body = format!("    let s = i % STAGES\n{wait}{drop}{release}");
    out += &format!("role consumer[{}] {{\n  for i in 0..ITERS {{\n{body}  }}\n}}\n", r.consumers);
    if r.second_role {
        out += &format!("\nrole other[1] {{\n  for i in 0..ITERS {{\n{body}  }}\n}}\n");
    }
    out
}

/// Kinds found, or `None` when the search did not finish within its bound.
fn kinds(src: &str, symmetry: bool, por: bool) -> Option<(BTreeSet<ViolationKind>, usize)> {
    let ast = lang::parse(src).unwrap_or_else(|d| panic!("generated ring does not parse: {d:?}\n{src}"));
    lang::check(&ast).unwrap_or_else(|d| panic!("generated ring does not check: {d:?}\n{src}"));
    let proto = lower(&ast, &[]).unwrap_or_else(|d| panic!("generated ring does not lower: {d:?}\n{src}"));
    let opts = CheckOptions {
        max_states: Some(20_000),
        self_check: true,
        symmetry,
        por,
        threads: 1,
        ..CheckOptions::default()
    };
    let r = check(&Model::new(proto), &opts);
    assert_ne!(r.verdict, Verdict::InternalError, "{src}");
    r.bound
        .is_none()
        .then(|| (r.violations.iter().map(|v| v.kind).collect(), r.stats.states))
}

/// The law below, on one generated ring.
fn reduction_keeps_the_kinds(r: &Ring) -> Result<(), TestCaseError> {
    let src = render(r);
    let plain = kinds(&src, false, false);
    // The unreduced search is the one a bound stops: a ring it cannot finish is rejected before
    // the three other searches are spent on it (the same rings are kept as before).
    prop_assume!(plain.is_some());
    let por = kinds(&src, false, true);
    let both = kinds(&src, true, true);
    let sym = kinds(&src, true, false);
    prop_assume!(plain.is_some() && por.is_some() && both.is_some() && sym.is_some());
    let (plain, por, both, sym) = (plain.unwrap(), por.unwrap(), both.unwrap(), sym.unwrap());
    prop_assert_eq!(&plain.0, &por.0, "POR alone\n{}", src);
    prop_assert_eq!(&plain.0, &both.0, "POR with symmetry\n{}", src);
    prop_assert!(por.1 <= plain.1 && both.1 <= sym.1, "POR stored more states\n{}", src);
    Ok(())
}

// 256 rings in all, as two tests of 128 so that the test harness runs them on two cores (each
// test's cases run one after another).
proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Law: on producer/consumer rings with planted mistakes, the partial-order reduction (alone
    /// and with symmetry) finds exactly the kinds the unreduced search finds, and never stores
    /// more states.
    #[test]
    fn partial_order_reduction_keeps_the_kinds_of_mistaken_rings(r in arb_ring()) {
        reduction_keeps_the_kinds(&r)?;
    }

    /// The same law on another 128 generated rings.
    #[test]
    fn partial_order_reduction_keeps_the_kinds_of_mistaken_rings_more(r in arb_ring()) {
        reduction_keeps_the_kinds(&r)?;
    }
}

/// The right ring is reduced where the cut at waits applies: the 3-stage ring with 3 consumers and
/// 6 iterations, with symmetry, stores 865 states instead of 2,284 (exact counts pinned).
#[test]
fn the_right_ring_is_reduced_by_the_cut_at_waits() {
    let r = Ring {
        stages: 3,
        iters: 6,
        consumers: 3,
        second_role: false,
        empty_count: 0,
        producer: Producer {
            wait: 0,
            fill: 0,
            late_wait: false,
        },
        consumer: Consumer {
            wait: 0,
            release: 0,
            drop_last: false,
        },
    };
    let src = render(&r);
    let (plain_kinds, plain) = kinds(&src, true, false).unwrap();
    let (por_kinds, por) = kinds(&src, true, true).unwrap();
    assert!(plain_kinds.is_empty() && por_kinds.is_empty(), "{src}");
    eprintln!("ring(3,3,6): {plain} states without POR, {por} with");
    assert_eq!((plain, por), (2284, 473), "{src}");
}

/// The cut at a wait holds only while the arrivals the others can still make fall short of the
/// barrier's pending count. Here two threads' arrivals (count 2) release a waiter that then
/// writes what a reader reads: the order "release, write, read" is the only one with a stale
/// read, and the reduction must not choose the read alone while the waiter can still be released.
#[test]
fn arrivals_that_release_a_waiter_keep_it_in_the_reduction() {
    for (count, arrivers) in [(1, 1), (2, 2), (2, 1)] {
        let src = format!(
            "protocol released\nexpect holds\n\nbarrier b count {count}\nbuffer x bytes 4\n\n\
             role a[{arrivers}] {{\n  arrive(b)\n}}\n\n\
             role w[1] {{\n  wait_parity(b, 0)\n  write(x, 1)\n}}\n\n\
             role r[1] {{\n  read(x, expect = 0)\n}}\n"
        );
        let (plain, _) = kinds(&src, false, false).unwrap();
        let (por, _) = kinds(&src, false, true).unwrap();
        let (both, _) = kinds(&src, true, true).unwrap();
        assert_eq!(plain, por, "{src}");
        assert_eq!(plain, both, "{src}");
        let released = count <= arrivers;
        assert_eq!(plain.contains(&ViolationKind::StaleRead), released, "{src}: {plain:?}");
    }
}
