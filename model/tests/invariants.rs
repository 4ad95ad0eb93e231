//! Laws of the barrier state machine, checked on random walks through random protocols.
//!
//! The protocols are generated as source text (so they also exercise parsing and lowering) from a
//! pool of barrier operations; the walks pick enabled actions at random. Whatever the protocol
//! does, including undefined behaviour, the model must keep these invariants on every state it
//! produces.

use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::state::{Life, State};
use phasecheck_model::rt::{Action, Model, Obs};
use proptest::prelude::*;

/// One statement drawn from the pool, over barriers `b0`, `b1` (counts given) and buffer `d`.
fn stmt() -> impl Strategy<Value = String> {
    let bar = prop_oneof![Just("b0"), Just("b1")];
    (0u8..14, bar, 1u8..3, 0u8..2).prop_map(|(k, b, n, p)| match k {
        0 => format!("arrive({b})"),
        1 => format!("arrive({b}, {n})"),
        2 => format!("arrive_and_wait({b})"),
        3 => format!("wait_parity({b}, {p})"),
        4 => format!("let ok$ = try_wait_parity({b}, {p})"),
        5 => format!("arrive_expect_tx({b}, {})", 16 * n as u32),
        6 => format!("expect_tx({b}, {})", 16 * n as u32),
        7 => format!("complete_tx({b}, 16)"),
        8 => format!("copy_async(d, {b}, bytes = {})", 16 * n as u32),
        9 => "read(d)".to_string(),
        10 => format!("arrive_and_drop({b})"),
        11 => format!("let t$ = arrive({b})\n    wait({b}, t$)"),
        12 => format!("memcpy_async(d, {b})"),
        _ => "work".to_string(),
    })
}

fn program() -> impl Strategy<Value = String> {
    (1u8..4, 1u8..4, prop::collection::vec(prop::collection::vec(stmt(), 1..6), 1..4)).prop_map(|(c0, c1, roles)| {
        let mut s = format!("protocol random\nbarrier b0 count {c0}\nbarrier b1 count {c1}\nbuffer d bytes 32\n");
        for (i, body) in roles.iter().enumerate() {
            s.push_str(&format!("role r{i}[{}] {{\n", 1 + i % 2));
            for (k, st) in body.iter().enumerate() {
                s.push_str("    ");
                s.push_str(&st.replace('$', &k.to_string()));
                s.push('\n');
            }
            s.push_str("}\n");
        }
        s
    })
}

fn model_of(src: &str) -> Model {
    let ast = lang::parse(src).unwrap_or_else(|e| panic!("generated program does not parse: {e:?}\n{src}"));
    lang::check(&ast).unwrap_or_else(|e| panic!("generated program does not check: {e:?}\n{src}"));
    Model::new(lower(&ast, &[]).expect("lowers"))
}

/// Walk at most `choices.len()` steps, calling `law(before, action, after, observations)`.
fn walk(m: &Model, choices: &[usize], mut law: impl FnMut(&State, Action, &State, &[Obs])) {
    let Some(mut s) = m.init().next else { return };
    let mut enabled = Vec::new();
    for &c in choices {
        enabled.clear();
        m.actions(&s, &mut enabled);
        if enabled.is_empty() {
            return;
        }
        let a = enabled[c % enabled.len()];
        let out = m.step(&s, a);
        let Some(next) = out.next else { return };
        law(&s, a, &next, &out.event.expect("event").obs);
        s = next;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn phase_never_decreases(src in program(), choices in prop::collection::vec(0usize..64, 0..60)) {
        let m = model_of(&src);
        walk(&m, &choices, |a, _, b, _| {
            for (x, y) in a.barriers.iter().zip(b.barriers.iter()) {
                // Only a fresh init (after inval) may start a barrier over.
                if y.life == Life::Live && x.life == Life::Live {
                    assert!(y.phase >= x.phase, "phase went from {} to {}", x.phase, y.phase);
                }
            }
        });
    }

    #[test]
    fn pending_stays_within_zero_and_expected(src in program(), choices in prop::collection::vec(0usize..64, 0..60)) {
        let m = model_of(&src);
        walk(&m, &choices, |_, _, b, _| {
            for bs in b.barriers.iter().filter(|bs| bs.life == Life::Live) {
                assert!(0 <= bs.pending && bs.pending <= bs.expected, "pending {} outside 0..={}", bs.pending, bs.expected);
                assert!(bs.expected >= 1, "expected count {} below 1 on a live barrier", bs.expected);
            }
        });
    }

    #[test]
    fn phase_completes_only_at_zero_pending_and_zero_tx(src in program(), choices in prop::collection::vec(0usize..64, 0..60)) {
        let m = model_of(&src);
        walk(&m, &choices, |a, _, b, obs| {
            let completed: Vec<(u16, i64, i64)> = obs
                .iter()
                .filter_map(|o| match o {
                    Obs::PhaseCompleted { bar, pending, tx, .. } => Some((*bar, *pending, *tx)),
                    _ => None,
                })
                .collect();
            for &(bar, pending, tx) in &completed {
                assert_eq!((pending, tx), (0, 0), "phase of barrier {bar} completed at pending {pending}, tx {tx}");
            }
            // And a phase never advances without a recorded completion.
            for (i, (x, y)) in a.barriers.iter().zip(b.barriers.iter()).enumerate() {
                if x.life == Life::Live && y.phase > x.phase {
                    let n = completed.iter().filter(|c| c.0 as usize == i).count() as i64;
                    assert_eq!(y.phase - x.phase, n, "barrier {i} advanced {} phases with {n} completions", y.phase - x.phase);
                }
            }
        });
    }

    #[test]
    fn tx_count_stays_within_ptx_range(src in program(), choices in prop::collection::vec(0usize..64, 0..60)) {
        let m = model_of(&src);
        walk(&m, &choices, |_, _, b, _| {
            for bs in b.barriers.iter() {
                assert!(bs.tx.abs() <= phasecheck_model::program::ir::MAX_COUNT);
            }
        });
    }
}

#[test]
fn fresh_barrier_parity_one_wait_returns_at_once() {
    // CUTLASS's producer start state: the phase "before" phase 0 counts as complete.
    let m = model_of("protocol p\nbarrier e count 1\nrole producer[1] {\n  wait_parity(e, 1)\n  arrive(e)\n}\n");
    let s = m.init().next.unwrap();
    let mut enabled = Vec::new();
    m.actions(&s, &mut enabled);
    assert_eq!(enabled, vec![Action::Thread(0)]);
}

#[test]
fn fresh_barrier_parity_zero_wait_blocks() {
    let m = model_of("protocol p\nbarrier e count 1\nrole consumer[1] {\n  wait_parity(e, 0)\n}\n");
    let s = m.init().next.unwrap();
    let mut enabled = Vec::new();
    m.actions(&s, &mut enabled);
    assert!(enabled.is_empty(), "a wait on phase 0 of a fresh barrier must block");
    let v = m.state_violations(&s, &enabled);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].kind, phasecheck_model::ViolationKind::Deadlock);
}

/// Every violation kind reachable from the initial state (`reachable_violations`' kinds).
fn reachable_kinds(m: &Model) -> std::collections::BTreeSet<phasecheck_model::ViolationKind> {
    reachable_violations(m).into_iter().map(|v| v.kind).collect()
}

/// The kinds every execution of the spec text `src` can reach.
fn kinds_of(src: &str) -> std::collections::BTreeSet<phasecheck_model::ViolationKind> {
    reachable_kinds(&model_of(src))
}

#[test]
fn an_assertion_in_a_completion_function_fails_exactly_when_its_condition_is_zero() {
    use phasecheck_model::ViolationKind::Assertion;
    let with = |cond: &str| {
        format!(
            "protocol p\nvar ctrl = 0\nbarrier b count 1 completion tick\ncompletion tick {{\n  assert {cond}\n  ctrl = ctrl + 1\n}}\nrole w[1] {{\n  for r in 0..2 {{\n    let t = arrive(b)\n    wait(b, t)\n  }}\n}}\n"
        )
    };
    // The second phase's completion sees ctrl == 1.
    assert!(kinds_of(&with("ctrl == 0")).contains(&Assertion));
    assert!(!kinds_of(&with("ctrl < 2")).contains(&Assertion));
    assert!(!kinds_of(&with("1")).contains(&Assertion));
}

#[test]
fn a_completion_function_takes_the_branch_its_condition_names() {
    use phasecheck_model::ViolationKind::Assertion;
    // The first phase's completion sees ctrl == 0 and must set flag; the second must not reset it.
    let src = "protocol p\nvar ctrl = 0\nvar flag = 0\nbarrier b count 1 completion tick\ncompletion tick {\n  if ctrl == 0 { flag = 1 } else { flag = flag }\n  ctrl = ctrl + 1\n  assert flag == 1\n}\nrole w[1] {\n  for r in 0..2 {\n    let t = arrive(b)\n    wait(b, t)\n  }\n}\n";
    assert!(!kinds_of(src).contains(&Assertion));
    let inverted = src.replace("if ctrl == 0", "if ctrl != 0");
    assert!(kinds_of(&inverted).contains(&Assertion));
}

#[test]
fn a_byte_range_past_the_end_of_its_buffer_is_an_assertion_whichever_end_is_out() {
    use phasecheck_model::ViolationKind::Assertion;
    // Thread 1's range starts inside the buffer's 64 bytes and ends past them; thread 0's fits.
    let src = |off: &str| format!("protocol p\nbuffer tile bytes 64\nrole w[2] {{\n  read(tile, offset = {off}, bytes = 48)\n}}\n");
    assert!(kinds_of(&src("tid * 32")).contains(&Assertion));
    assert!(!kinds_of(&src("tid * 8")).contains(&Assertion));
}

#[test]
fn gtid_counts_from_zero_in_every_cta_of_a_cluster() {
    use phasecheck_model::ViolationKind::Deadlock;
    // Each CTA's thread 0 arrives on its own CTA's barrier: with gtid counted cluster-wide,
    // CTA 1 would have no thread 0 and its waiter would starve.
    let src = "protocol p\ncluster 2\nbarrier b count 1\nrole w[2] {\n  if gtid == 0 { arrive(b) }\n  wait_parity(b, 0)\n}\n";
    assert!(!kinds_of(src).contains(&Deadlock));
    let shifted = src.replace("gtid == 0", "gtid == 1");
    assert!(!kinds_of(&shifted).contains(&Deadlock));
    let absent = src.replace("gtid == 0", "gtid == 2");
    assert!(kinds_of(&absent).contains(&Deadlock));
}

/// A uniform warp's arrivals are one step, recorded as one arrival per phase it reaches with the
/// lanes that landed in it: 4 lanes on a count-2 barrier complete phase 0 with two of them and
/// phase 1 with the other two (what a trace and the root causes read).
#[test]
fn a_uniform_warps_arrivals_are_recorded_per_phase_with_their_lanes() {
    let m = model_of("protocol p\nwarp_size 4\nbarrier b count 2\nrole w warps 1 uniform {\n  arrive(b)\n}\n");
    let s = m.init().next.unwrap();
    let mut enabled = Vec::new();
    m.actions(&s, &mut enabled);
    assert_eq!(enabled.len(), 1, "one agent for the warp");
    let out = m.step(&s, enabled[0]);
    let obs = out.event.expect("event").obs;
    let arrivals: Vec<(i64, i64)> = obs
        .iter()
        .filter_map(|o| match o {
            Obs::Arrived { phase, count, .. } => Some((*phase, *count as i64)),
            _ => None,
        })
        .collect();
    assert_eq!(arrivals, vec![(0, 2), (1, 2)], "{obs:?}");
    let completed = obs.iter().filter(|o| matches!(o, Obs::PhaseCompleted { .. })).count();
    assert_eq!(completed, 2, "{obs:?}");
}

#[test]
fn a_whole_write_after_partial_writes_replaces_every_byte_including_the_first() {
    use phasecheck_model::ViolationKind::StaleRead;
    // Two halves written apart (the buffer's record is now per range), then the whole buffer:
    // every byte holds version 3, the first one too.
    let src = |lo: u32| {
        format!("protocol p\nbuffer tile bytes 64\nrole w[1] {{\n  write(tile, 1, offset = 0, bytes = 32)\n  write(tile, 2, offset = 32, bytes = 32)\n  write(tile, 3)\n  read(tile, expect = 3, offset = {lo}, bytes = 1)\n}}\n")
    };
    for lo in [0, 1, 31, 32, 63] {
        assert!(!kinds_of(&src(lo)).contains(&StaleRead), "byte {lo}");
    }
    let wrong = src(0).replace("expect = 3", "expect = 1");
    assert!(kinds_of(&wrong).contains(&StaleRead));
}

#[test]
fn a_copys_default_version_counts_partial_writes_as_writes() {
    use phasecheck_model::ViolationKind::StaleRead;
    // A copy with no `version =` lands the count of writes to its buffer so far: after one
    // partial write that is version 1, as after one whole write.
    let src = |w: &str, v: u32| {
        format!("protocol p\nbarrier b count 1\nbuffer tile bytes 64\nrole w[1] {{\n  {w}\n  memcpy_async(tile, b)\n  let t = arrive(b)\n  wait(b, t)\n  read(tile, expect = {v})\n}}\n")
    };
    for w in [
        "write(tile, 7)",
        "write(tile, 7, offset = 0, bytes = 32)",
        "write(tile, 7, offset = 32, bytes = 32)",
    ] {
        assert!(!kinds_of(&src(w, 1)).contains(&StaleRead), "{w}");
        assert!(kinds_of(&src(w, 0)).contains(&StaleRead), "{w}");
    }
}

/// The planted defect `no-parity-aliasing` (docs/mutants.md) must differ from the hardware only
/// where parities alias: on a fresh barrier a wait on the current phase still blocks and one on
/// the phase before it still returns, as on the hardware (else the planted-mutant test would
/// judge the library against a defect that breaks every wait, not the aliasing it names).
#[test]
fn the_planted_no_parity_aliasing_defect_changes_only_the_aliased_wait() {
    let enabled_at_start = |src: &str, planted: bool| {
        let mut m = model_of(src);
        if planted {
            m.mutant = Some(phasecheck_model::rt::Mutant::NoParityAliasing);
        }
        let s = m.init().next.unwrap();
        let mut en = Vec::new();
        m.actions(&s, &mut en);
        !en.is_empty()
    };
    for planted in [false, true] {
        assert!(!enabled_at_start(
            "protocol p\nbarrier e count 1\nrole c[1] {\n  wait_parity(e, 0)\n}\n",
            planted
        ));
        assert!(enabled_at_start(
            "protocol p\nbarrier e count 1\nrole c[1] {\n  wait_parity(e, 1)\n}\n",
            planted
        ));
    }
}

/// `tcgen05.alloc` and `tcgen05.dealloc` are warp-wide (`.sync.aligned`): a uniform warp
/// allocates its tensor memory once, not once per lane, and frees it once.
#[test]
fn a_uniform_warp_allocates_and_frees_tensor_memory_once() {
    let src = "protocol u\nwarp_size 4\nbarrier ready count 1\nbarrier done count 1\nbuffer acc bytes 512\nrole mma warps 1 uniform {\n  tmem_alloc(acc, 64)\n  let e = elect()\n  if e == 1 { arrive(ready) }\n  wait_parity(done, 0)\n  tmem_dealloc(acc)\n}\nrole epilogue[1] {\n  wait_parity(ready, 0)\n  arrive(done)\n}\n";
    assert_eq!(kinds_of(src), Default::default());
}

/// The self-check's wait rule (I-WAIT) refuses a wait that returned on a phase an even number of
/// phases behind the current one: the hardware's parity makes it look like the current one, so a
/// step that passed it lost track of aliasing. A real step passes; the same step naming the phase
/// two behind the current one does not.
#[test]
fn the_self_check_refuses_a_wait_that_returned_on_an_aliased_phase() {
    let m = model_of("protocol p\nbarrier b count 1\nrole w[1] {\n  arrive(b)\n  arrive(b)\n  arrive(b)\n  wait_parity(b, 0)\n}\n");
    let mut s = m.init().next.unwrap();
    let mut en = Vec::new();
    loop {
        en.clear();
        m.actions(&s, &mut en);
        let a = en[0];
        let out = m.step(&s, a);
        let waited = out.event.as_ref().unwrap().obs.iter().any(|o| matches!(o, Obs::Waited { .. }));
        if waited {
            assert!(phasecheck_model::rt::selfcheck::transition(&m, &s, a, &out).is_ok());
            let mut aliased = out.clone();
            for o in &mut aliased.event.as_mut().unwrap().obs {
                if let Obs::Waited { phase, .. } = o {
                    *phase -= 1; // current 3, named 2 -> 1: two phases behind the current one
                }
            }
            let e = phasecheck_model::rt::selfcheck::transition(&m, &s, a, &aliased).unwrap_err();
            assert_eq!(e.rule, "I-WAIT");
            return;
        }
        s = out.next.unwrap();
    }
}

/// `cp.async.commit_group` is per thread: each lane of a uniform warp commits its own copies once,
/// so the elected lane's copy is in one group, the newest. `cp_async_wait_group(1)` may return
/// with that group in flight (the read after it races with the copy), `cp_async_wait_group(0)`
/// lands it.
#[test]
fn a_uniform_warp_commits_its_cp_async_copies_as_one_group() {
    use phasecheck_model::ViolationKind::DataRace;
    let src = |n: u32| {
        format!("protocol p\nwarp_size 2\nbuffer d bytes 64\nrole w warps 1 uniform {{\n  let e = elect()\n  if e == 1 {{\n    cp_async(d)\n  }}\n  cp_async_commit_group()\n  cp_async_wait_group({n})\n  read(d)\n}}\n")
    };
    assert_eq!(kinds_of(&src(0)), Default::default());
    assert!(kinds_of(&src(1)).contains(&DataRace));
}

/// A deadlock by spinning needs a loop that nothing can end, changing nothing but the spinning
/// thread's pc and locals on its way (docs/model.md, `Model::spins`). A loop that invalidates and
/// re-initialises a barrier comes back to the same state, but on its way the waiter on that
/// barrier can move (its wait then uses an invalidated barrier): the waiter is not blocked, so
/// that use is the one violation, not a deadlock.
#[test]
fn a_loop_that_lets_a_waiter_move_on_its_way_is_not_a_deadlock() {
    use phasecheck_model::ViolationKind::{Deadlock, Uninitialized};
    let src = "protocol p\nbarrier b count 1 manual_init\nrole w[1] {\n  init(b, 1)\n  while 1 {\n    inval(b)\n    init(b, 1)\n  }\n}\nrole c[1] {\n  wait_parity(b, 0)\n}\n";
    assert_eq!(kinds_of(src), [Uninitialized].into_iter().collect());
    // The same loop with nothing on its way but a step that changes no shared state spins.
    let idle = src.replace("    inval(b)\n    init(b, 1)\n", "    work\n");
    assert!(kinds_of(&idle).contains(&Deadlock));
}

/// Every violation reachable from the initial state with its message (a depth-first walk over
/// every interleaving; the protocols here are a few dozen states).
fn reachable_violations(m: &Model) -> Vec<phasecheck_model::rt::Violation> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let Some(s0) = m.init().next else { return out };
    let mut stack = vec![s0];
    while let Some(s) = stack.pop() {
        if !seen.insert(format!("{s:?}")) {
            continue;
        }
        let mut enabled = Vec::new();
        m.actions(&s, &mut enabled);
        out.extend(m.state_violations(&s, &enabled));
        for a in enabled {
            let o = m.step(&s, a);
            out.extend(o.violations);
            stack.extend(o.next);
        }
    }
    out
}

/// A named barrier orders only what a warp did before its `bar_arrive`: a producer that writes
/// the buffer again after signalling races with the consumer that `bar_sync`ed on the barrier,
/// and the race is reported at the consumer's read too (when the read comes after the late
/// write), not only at the late write (when it comes after the read).
#[test]
fn a_write_after_bar_arrive_races_with_the_bar_sync_waiters_read() {
    use phasecheck_model::ViolationKind::DataRace;
    let src = "protocol p\nwarp_size 1\nbuffer d bytes 16\nrole producer warps 1 {\n  write(d, 1)\n  bar_arrive(1, 2)\n}\nrole consumer warps 1 {\n  bar_sync(1, 2)\n  read(d)\n}\n";
    assert_eq!(kinds_of(src), Default::default());
    let late = src.replace("  bar_arrive(1, 2)\n", "  bar_arrive(1, 2)\n  write(d, 2)\n");
    let races: Vec<String> = reachable_violations(&model_of(&late))
        .into_iter()
        .filter(|v| v.kind == DataRace)
        .map(|v| v.message)
        .collect();
    assert!(
        races.iter().any(|m| m.starts_with("consumer") && m.contains(" reads ")),
        "{races:#?}"
    );
    assert!(
        races.iter().any(|m| m.starts_with("producer") && m.contains(" overwrites ")),
        "{races:#?}"
    );
}

/// A TMA store of a whole buffer (`copy_store_async(d)`) reads every byte of it through the
/// async proxy, the first one included: a generic write of byte 0 not followed by
/// `fence_proxy_async` is a race across proxies, and a write of byte 0 while the store may
/// still read it is a data race; the fence and a `wait_group_read(0)` make both safe.
#[test]
fn a_whole_buffer_tma_store_reads_the_first_byte_too() {
    use phasecheck_model::ViolationKind::DataRace;
    let with = |before: &str, after: &str| {
        format!("protocol p\nbuffer d bytes 64\nrole t[1] {{\n  write(d, 1, offset = 0, bytes = 1)\n{before}  copy_store_async(d)\n  commit_group()\n{after}  wait_group(0)\n}}\n")
    };
    let fence = "  fence_proxy_async()\n";
    assert_eq!(kinds_of(&with(fence, "")), Default::default());
    assert!(kinds_of(&with("", "")).contains(&DataRace));
    let overwrite = "  write(d, 2, offset = 0, bytes = 1)\n";
    assert!(kinds_of(&with(fence, overwrite)).contains(&DataRace));
    let waited = "  wait_group_read(0)\n  write(d, 2, offset = 0, bytes = 1)\n";
    assert_eq!(kinds_of(&with(fence, waited)), Default::default());
}

/// `tcgen05.alloc` blocks until its CTA has the columns free: a warp that holds all 512
/// columns and waits for a signal that another warp sends only after its own allocation
/// deadlocks the CTA; freeing the columns before waiting lets both run.
#[test]
fn a_tmem_alloc_past_the_free_columns_waits_for_a_dealloc() {
    use phasecheck_model::ViolationKind::Deadlock;
    let src = "protocol p\nbarrier ready count 1\nbuffer x bytes 512\nbuffer y bytes 512\nrole a[1] {\n  tmem_alloc(x, 512)\n  wait_parity(ready, 0)\n  tmem_dealloc(x)\n}\nrole b[1] {\n  tmem_alloc(y, 256)\n  arrive(ready)\n  tmem_dealloc(y)\n}\n";
    assert_eq!(kinds_of(src), [Deadlock].into_iter().collect());
    let freed = src.replace(
        "  wait_parity(ready, 0)\n  tmem_dealloc(x)\n",
        "  tmem_dealloc(x)\n  wait_parity(ready, 0)\n",
    );
    assert_eq!(kinds_of(&freed), Default::default());
}

/// Bytes a TMA copy wrote came through the async proxy: a TMA store may read them back without
/// a `fence_proxy_async`, even where the generic proxy wrote them before the copy. Bytes only
/// the generic proxy wrote still need the fence.
#[test]
fn bytes_a_tma_copy_overwrote_need_no_proxy_fence_before_a_tma_store() {
    use phasecheck_model::ViolationKind::DataRace;
    // The generic write covers `written`, the TMA copy bytes 0..16, the store `stored`.
    let with = |written: u32, stored: u32| {
        format!("protocol p\nbarrier full count 1\nbuffer d bytes 32\nrole t[1] {{\n  write(d, 1, offset = {written}, bytes = 16)\n  arrive_expect_tx(full, 16)\n  copy_async(d, full, offset = 0, bytes = 16)\n  wait_parity(full, 0)\n  copy_store_async(d, offset = {stored}, bytes = 16)\n  commit_group()\n  wait_group(0)\n}}\n")
    };
    assert_eq!(kinds_of(&with(0, 0)), Default::default());
    assert_eq!(kinds_of(&with(16, 16)), [DataRace].into_iter().collect());
}

/// A range of zero bytes touches no byte, even in a buffer a param sized to nothing: unordered
/// writes of `bytes = N` with N = 0 race with nothing, while the same writes of one byte do.
#[test]
fn writes_of_zero_bytes_race_with_nothing() {
    use phasecheck_model::ViolationKind::DataRace;
    let with = |n: u32| {
        format!("protocol p\nparam N = {n}\nbuffer tail bytes N\nrole w[2] {{\n  write(tail, tid, offset = 0, bytes = N)\n  write(tail, tid + 2, offset = 0, bytes = N)\n}}\n")
    };
    assert_eq!(kinds_of(&with(0)), Default::default());
    assert_eq!(kinds_of(&with(1)), [DataRace].into_iter().collect());
}

/// Allocating tensor memory for a buffer that still holds its columns is reported as the double
/// allocation it is, even when the CTA has no columns left (it is not a wait for free columns).
#[test]
fn a_double_tmem_alloc_is_reported_not_waited_on() {
    use phasecheck_model::ViolationKind::Lifetime;
    let src = "protocol p\nbuffer x bytes 512\nrole a[1] {\n  tmem_alloc(x, 512)\n  tmem_alloc(x, 512)\n  tmem_dealloc(x)\n}\n";
    assert_eq!(kinds_of(src), [Lifetime].into_iter().collect());
}

/// A completion function may issue a copy (here when a TMA landing completes the phase, so no
/// thread runs it): the copy is followed like a thread's, so reading its bytes before it has
/// landed and been waited for is a race, and waiting for its barrier first is not.
#[test]
fn a_copy_issued_by_a_completion_function_on_a_landing_is_tracked_like_a_threads() {
    use phasecheck_model::ViolationKind::{DataRace, Lifetime};
    let src = "protocol p\nbarrier full count 1 completion refill\nbarrier again count 1\nbuffer d bytes 32\nbuffer e bytes 32\ncompletion refill {\n  copy_async(e, again, offset = 0, bytes = 16)\n}\nrole t[1] {\n  arrive_expect_tx(full, 32)\n  copy_async(d, full)\n  wait_parity(full, 0)\n  arrive_expect_tx(again, 16)\n  wait_parity(again, 0)\n  read(e, offset = 0, bytes = 16)\n}\n";
    assert_eq!(kinds_of(src), Default::default());
    let early = src.replace("  arrive_expect_tx(again, 16)\n  wait_parity(again, 0)\n", "");
    let v = reachable_violations(&model_of(&early));
    assert_eq!(
        v.iter().map(|v| v.kind).collect::<std::collections::BTreeSet<_>>(),
        [DataRace, Lifetime].into_iter().collect()
    );
    assert!(
        v.iter().any(|v| v.message.contains("before the async copy into bytes 0..16 of it")),
        "{v:#?}"
    );
}

/// Zero bytes in the middle of a copy still in flight are not bytes of it: a write or a read
/// of `bytes = 0` there meets no copy, while one byte there is a race with the copy.
#[test]
fn zero_bytes_inside_a_copy_in_flight_meet_no_copy() {
    use phasecheck_model::ViolationKind::DataRace;
    let with = |access: &str, n: u32| {
        format!("protocol p\nbarrier full count 1\nbuffer d bytes 32\nrole t[1] {{\n  arrive_expect_tx(full, 16)\n  copy_async(d, full, offset = 0, bytes = 16)\n  {access}offset = 8, bytes = {n})\n  wait_parity(full, 0)\n}}\n")
    };
    for access in ["write(d, 2, ", "read(d, "] {
        assert_eq!(kinds_of(&with(access, 0)), Default::default(), "{access}");
        assert_eq!(kinds_of(&with(access, 1)), [DataRace].into_iter().collect(), "{access}");
    }
}

/// A completion function run when a TMA landing completes its phase may issue a whole-buffer
/// copy too: reading that buffer before the copy has landed is reported as a race that names a
/// thread of the protocol as the copy's issuer, and waiting for the copy's barrier first is clean.
#[test]
fn a_whole_copy_issued_by_a_completion_function_on_a_landing_is_tracked_like_a_threads() {
    use phasecheck_model::ViolationKind::{DataRace, Lifetime};
    let src = "protocol p\nbarrier full count 1 completion refill\nbarrier again count 1\nbuffer d bytes 32\nbuffer e bytes 32\ncompletion refill {\n  copy_async(e, again)\n}\nrole t[1] {\n  arrive_expect_tx(full, 32)\n  copy_async(d, full)\n  wait_parity(full, 0)\n  arrive_expect_tx(again, 32)\n  wait_parity(again, 0)\n  read(e)\n}\n";
    assert_eq!(kinds_of(src), Default::default());
    let early = src.replace("  arrive_expect_tx(again, 32)\n  wait_parity(again, 0)\n", "");
    let v = reachable_violations(&model_of(&early));
    assert_eq!(
        v.iter().map(|v| v.kind).collect::<std::collections::BTreeSet<_>>(),
        [DataRace, Lifetime].into_iter().collect()
    );
    assert!(
        v.iter()
            .any(|v| v.message.contains("reads e before the async copy into it (issued by t#0)")),
        "{v:#?}"
    );
}

/// A broken model rule ends the step as an internal error naming the rule (docs/model.md,
/// "Invariants"): with the planted defect `wait-always-ready`, a blocking wait on a phase that is
/// not complete is stepped through, and the step reports R-WAIT with the wait it passed, rather
/// than ending the execution silently (which would read as a clean verdict).
#[test]
fn a_wait_passed_on_an_incomplete_phase_is_the_internal_error_r_wait() {
    let mut m = model_of("protocol p\nbarrier e count 1\nrole c[1] {\n  wait_parity(e, 0)\n}\n");
    m.mutant = Some(phasecheck_model::rt::Mutant::WaitAlwaysReady);
    let s = m.init().next.unwrap();
    let mut en = Vec::new();
    m.actions(&s, &mut en);
    assert_eq!(en.len(), 1, "{en:?}");
    let out = m.step(&s, en[0]);
    let e = out.internal.expect("an internal error");
    assert_eq!(e.rule, "R-WAIT");
    assert!(e.message.contains("passed a blocking wait on phase 0 of e"), "{}", e.message);
}

/// A symmetry class is a set of two or more interchangeable threads: a thread alone in its role
/// has nothing to be swapped with, so a protocol of one-thread roles has no symmetry (the report
/// header names no classes) and one role of two identity-free threads beside them makes one class.
#[test]
fn a_thread_alone_in_its_role_is_in_no_symmetry_class() {
    let alone = "protocol p\nbarrier b count 2\nrole a[1] {\n  arrive(b)\n}\nrole c[1] {\n  arrive(b)\n  wait_parity(b, 0)\n}\n";
    assert_eq!(model_of(alone).symmetry_class_count(), 0);
    assert_eq!(
        phasecheck_model::rt::symmetry::symmetry_classes(&model_of(alone).proto),
        Vec::<Vec<usize>>::new()
    );
    let pair = alone
        .replace("barrier b count 2", "barrier b count 3")
        .replace("role a[1]", "role a[2]");
    assert_eq!(model_of(&pair).symmetry_class_count(), 1);
    assert_eq!(
        phasecheck_model::rt::symmetry::symmetry_classes(&model_of(&pair).proto),
        vec![vec![0, 1]]
    );
}

/// The cluster barrier's phases are told apart by marks that alternate (docs/model.md,
/// "Clusters"): a thread waits for the phase it arrived on and no two live phases are more than
/// one apart, so nothing tells phase k from phase k + 2. A loop of `cluster_sync()` comes back to
/// the same state every two phases (up to the renaming of epochs by rank that stored states
/// get), which is what keeps such a loop's state space small.
#[test]
fn a_loop_of_cluster_syncs_comes_back_to_its_state_every_two_phases() {
    use phasecheck_model::rt::state::{State, Status};
    // Each agent's epochs replaced by their rank (0 stays 0): every happens-before comparison kept.
    fn ranked(mut s: State) -> State {
        let agents = s.threads[0].clock.len();
        let mut cols: Vec<Vec<u32>> = vec![vec![0]; agents];
        for c in s.threads.iter().map(|t| &t.clock).chain(s.named.iter().map(|n| &n.clock)) {
            for (a, &v) in c.iter().enumerate() {
                cols[a].push(v);
            }
        }
        for c in cols.iter_mut() {
            c.sort();
            c.dedup();
        }
        let clocks = s
            .threads
            .iter_mut()
            .map(|t| &mut t.clock)
            .chain(s.named.iter_mut().map(|n| &mut n.clock));
        for c in clocks {
            for (a, v) in c.iter_mut().enumerate() {
                *v = cols[a].binary_search(v).unwrap() as u32;
            }
        }
        s
    }
    let m = model_of("protocol p\ncluster 2\nrole w[1] {\n  while 1 {\n    cluster_sync()\n  }\n}\n");
    let mut s = m.init().next.unwrap();
    let mut en = Vec::new();
    // The state each time a phase has released its waiters (one thread per CTA; the walk takes
    // the first enabled step).
    let mut after_phase: Vec<State> = Vec::new();
    for _ in 0..60 {
        en.clear();
        m.actions(&s, &mut en);
        let out = m.step(&s, en[0]);
        assert!(out.violations.is_empty(), "{:?}", out.violations);
        let n = out.next.unwrap();
        let waiting = |s: &State| s.threads.iter().filter(|t| t.status == Status::AtClusterWait).count();
        if waiting(&n) < waiting(&s) {
            after_phase.push(ranked(n.clone()));
        }
        s = n;
    }
    assert!(after_phase.len() >= 6, "{} phases", after_phase.len());
    assert_ne!(after_phase[1], after_phase[2]);
    for k in 3..after_phase.len() {
        assert_eq!(after_phase[k], after_phase[k - 2], "phase {k}");
    }
}

/// A re-initialised barrier starts a new life for everyone (what anyone knew of its old phases
/// names nothing): a thread that learns of the re-init only through another barrier reads its
/// `wait_parity(b, 1)` as the fresh-barrier wait on the phase before the first, so once the new
/// life has completed a phase or two that wait is a stale-wait (the hardware answers about a
/// later phase), not a wait on a phase of the new life.
#[test]
fn a_reinitialised_barrier_is_fresh_for_a_thread_that_synchronised_through_another() {
    use phasecheck_model::ViolationKind::StaleWait;
    let src = "protocol p\nbarrier b count 1\nbarrier x count 1\nrole a[1] {\n  inval(b)\n  init(b)\n  arrive(x)\n  arrive(b)\n  wait_parity(b, 0)\n  arrive(b)\n  wait_parity(b, 1)\n}\nrole c[1] {\n  wait_parity(x, 0)\n  wait_parity(b, 1)\n}\n";
    let v = reachable_violations(&model_of(src));
    assert_eq!(
        v.iter().map(|v| v.kind).collect::<std::collections::BTreeSet<_>>(),
        [StaleWait].into_iter().collect()
    );
    assert!(v.iter().any(|v| v.message.contains("c#0 waits on phase -1 of b")), "{v:#?}");
}

/// A buffer tells whether some byte of it is left unfenced for the async proxy: a generic write
/// of the whole buffer or of part of it leaves its bytes unfenced until the writer's
/// `fence_proxy_async()`, after which the TMA store may read them.
#[test]
fn a_generic_write_leaves_its_buffer_unfenced_until_a_proxy_fence() {
    let m = model_of("protocol p\nbuffer d bytes 32\nrole t[1] {\n  write(d, 1)\n  fence_proxy_async()\n  write(d, 2, offset = 0, bytes = 16)\n  fence_proxy_async()\n  copy_store_async(d)\n  commit_group()\n  wait_group(0)\n}\n");
    let mut s = m.init().next.unwrap();
    let mut seen = vec![s.buffers[0].any_unfenced()];
    let mut en = Vec::new();
    loop {
        en.clear();
        m.actions(&s, &mut en);
        let Some(&a) = en.first() else { break };
        let out = m.step(&s, a);
        assert!(out.violations.is_empty(), "{:?}", out.violations);
        let Some(n) = out.next else { break };
        s = n;
        seen.push(s.buffers[0].any_unfenced());
    }
    seen.dedup();
    assert_eq!(seen, [false, true, false, true, false]);
}

/// `mbarrier.arrive.expect_tx` with a byte count of zero is a plain arrival (PTX allows any
/// count in range, zero included): it completes the phase like `arrive`, while a negative count
/// is out of range (tx-range).
#[test]
fn arrive_expect_tx_of_zero_bytes_is_a_plain_arrival() {
    use phasecheck_model::ViolationKind::TxRange;
    let with = |n: i64| format!("protocol p\nbarrier b count 1\nrole t[1] {{\n  arrive_expect_tx(b, {n})\n  wait_parity(b, 0)\n}}\n");
    assert_eq!(kinds_of(&with(0)), Default::default());
    assert_eq!(kinds_of(&with(-1)), [TxRange].into_iter().collect());
}

/// A protocol with more shared objects than a footprint names (256) is checked in full, the
/// reduction off, whichever object its steps touch, the 257th included: a wait on the last
/// barrier returns after the arrival on it and deadlocks without one.
#[test]
fn a_protocol_past_the_footprints_object_count_is_checked_in_full() {
    use phasecheck_model::ViolationKind::Deadlock;
    let with = |n: usize, arrive: &str| {
        format!(
            "protocol p\nbarrier b[{n}] count 1\nrole t[1] {{\n{arrive}  wait_parity(b[{}], 0)\n}}\n",
            n - 1
        )
    };
    for n in [257, 258] {
        let m = model_of(&with(n, &format!("  arrive(b[{}])\n", n - 1)));
        assert!(!m.por.applicable, "{n} barriers");
        assert_eq!(reachable_kinds(&m), Default::default(), "{n} barriers");
        assert_eq!(kinds_of(&with(n, "")), [Deadlock].into_iter().collect(), "{n} barriers");
    }
}

/// Stored states keep their epochs small (rt/symmetry.rs, clock epochs): once any epoch, a copy
/// engine's included, reaches 64, every agent's epochs are renumbered by rank, so a canonical
/// state never holds an epoch of 64 or more. Here the copy engine's own epoch jumps in one step:
/// the completion function it runs on the landing releases N times.
#[test]
fn canonical_states_keep_every_epoch_below_sixty_four() {
    for n in 60..=68 {
        let m = model_of(&format!("protocol p\nbarrier full count 1 completion more\nbarrier x count 1000\nbuffer d bytes 16\ncompletion more {{\n  for i in 0..{n} {{\n    arrive(x)\n  }}\n}}\nrole t[1] {{\n  arrive_expect_tx(full, 16)\n  copy_async(d, full)\n  wait_parity(full, 0)\n}}\n"));
        let mut s = m.init().next.unwrap();
        let (mut perm, mut en) = (Vec::new(), Vec::new());
        let mut top = 0;
        loop {
            let mut c = s.clone();
            m.canonical_form(&mut c, true, &mut perm);
            let clocks = c.threads.iter().map(|t| &t.clock[..]).chain(c.engines.iter().map(|e| &e[..]));
            let most = clocks.flat_map(|k| k.iter().copied()).max().unwrap_or(0);
            assert!(most < 64, "{n} arrivals: an epoch of {most} stored");
            top = top.max(s.engines.iter().flat_map(|e| e.iter().copied()).max().unwrap_or(0));
            en.clear();
            m.actions(&s, &mut en);
            let Some(&a) = en.first() else { break };
            match m.step(&s, a).next {
                Some(n) => s = n,
                None => break,
            }
        }
        assert!(top >= n as u32, "{n} arrivals: the engine's epochs reached only {top}");
    }
}

/// A converged warp's `commit` is one arrival for the warp wherever in the code it stands: a
/// warp that commits to a barrier, then commits to it again inside an `if` all its lanes take,
/// is not diverged (no entanglement), and neither is one that commits to two barriers in turn.
#[test]
fn a_converged_warp_commits_once_per_commit_inside_a_branch_too() {
    let branch = "protocol p\nwarp_size 2\nbarrier b count 1\nvar go = 1\nrole w warps 1 {\n  commit(b)\n  wait_parity(b, 0)\n  if go == 1 {\n    commit(b)\n    wait_parity(b, 1)\n  }\n}\n";
    assert_eq!(kinds_of(branch), Default::default());
    let two = "protocol p\nwarp_size 2\nbarrier b count 1\nbarrier c count 1\nvar go = 1\nrole w warps 1 {\n  commit(b)\n  wait_parity(b, 0)\n  if go == 1 {\n    commit(c)\n    wait_parity(c, 0)\n  }\n}\n";
    assert_eq!(kinds_of(two), Default::default());
}

/// A `fence_proxy_async()` makes visible to the async proxy only the barrier inits ordered
/// before it: an init by another thread that reached the fencing thread through nothing (its
/// arrival on the cluster barrier was relaxed, which releases no history) stays invisible, so a
/// TMA copy completing on that barrier is still reported, even though it runs after the fence.
#[test]
fn a_proxy_fence_does_not_cover_an_init_it_is_not_ordered_after() {
    use phasecheck_model::ViolationKind::Uninitialized;
    let with = |arrive: &str| {
        format!("protocol p\ncluster 2\nbarrier full count 1\nbarrier x count 1\nbuffer d bytes 16\nrole a[1] {{\n  if cta == 0 {{\n    inval(full)\n    init(full)\n    {arrive}()\n    cluster_wait()\n    wait_parity(x, 0)\n    arrive_expect_tx(full, 16)\n    copy_async(d, full)\n    wait_parity(full, 0)\n  }} else {{\n    cluster_sync()\n  }}\n}}\nrole f[1] {{\n  cluster_sync()\n  if cta == 0 {{\n    fence_proxy_async()\n    arrive(x)\n  }}\n}}\n")
    };
    let v = reachable_violations(&model_of(&with("cluster_arrive_relaxed")));
    assert_eq!(
        v.iter().map(|v| v.kind).collect::<std::collections::BTreeSet<_>>(),
        [Uninitialized].into_iter().collect(),
        "{v:#?}"
    );
    assert!(v.iter().any(|v| v.message.contains("is not visible to the async proxy")), "{v:#?}");
    // With a releasing arrival the init is ordered before the fence, which covers it.
    assert_eq!(kinds_of(&with("cluster_arrive")), Default::default());
}

/// What the lanes of a uniform warp share is done once for the warp (docs/model.md, warp-uniform
/// roles): its `arrive` is one arrival per lane (four here fill the count), but its wait is
/// answered once, so the step that passes it observes one wait (the trace and the self-check read these observations).
#[test]
fn a_uniform_warps_wait_is_answered_once_for_the_warp() {
    let m = model_of("protocol p\nwarp_size 4\nbarrier b count 4\nrole w warps 1 uniform {\n  arrive(b)\n  wait_parity(b, 0)\n}\n");
    let mut s = m.init().next.unwrap();
    let mut en = Vec::new();
    let mut waits = 0;
    loop {
        en.clear();
        m.actions(&s, &mut en);
        let Some(&a) = en.first() else { break };
        let out = m.step(&s, a);
        assert!(out.violations.is_empty(), "{:?}", out.violations);
        waits += out
            .event
            .as_ref()
            .unwrap()
            .obs
            .iter()
            .filter(|o| matches!(o, Obs::Waited { .. }))
            .count();
        match out.next {
            Some(n) => s = n,
            None => break,
        }
    }
    assert_eq!(waits, 1);
}

/// The self-check's landing rule (I-LAND): a TMA copy that lands on a barrier no longer live
/// must be reported as a lifetime violation, which ends the execution; a step that lands it and
/// runs on is refused as a model bug, whatever other violation it reports. (The model's own
/// `inval` refuses a barrier with a copy in flight, so the step is made by hand from a real one.)
#[test]
fn the_self_check_refuses_a_landing_on_a_dead_barrier_that_runs_on() {
    use phasecheck_model::rt::state::Life;
    use phasecheck_model::rt::Violation;
    use phasecheck_model::ViolationKind::DataRace;
    let m = model_of("protocol p\nbarrier full count 1\nbuffer d bytes 16\nrole t[1] {\n  arrive_expect_tx(full, 16)\n  copy_async(d, full)\n  wait_parity(full, 0)\n}\n");
    let mut s = m.init().next.unwrap();
    let mut en = Vec::new();
    let land = loop {
        en.clear();
        m.actions(&s, &mut en);
        if let Some(&a) = en.iter().find(|a| matches!(a, Action::Land(_))) {
            break a;
        }
        s = m.step(&s, en[0]).next.unwrap();
    };
    let out = m.step(&s, land);
    assert!(phasecheck_model::rt::selfcheck::transition(&m, &s, land, &out).is_ok());
    let mut dead = s.clone();
    dead.barriers[0].life = Life::Invalidated;
    for with in [false, true] {
        let mut ran_on = out.clone();
        if with {
            ran_on.violations.push(Violation {
                kind: DataRace,
                message: "a race".to_string(),
            });
        }
        let e = phasecheck_model::rt::selfcheck::transition(&m, &dead, land, &ran_on).unwrap_err();
        assert_eq!(e.rule, "I-LAND", "{with}: {}", e.message);
    }
}

/// A generic write of part of a buffer leaves unfenced for the async proxy only the bytes it
/// wrote: after a fenced whole write, a write of bytes 1.. leaves byte 0 fenced, so a TMA store
/// of byte 0 alone is no race across proxies, while one of byte 1 is.
#[test]
fn a_partial_write_leaves_the_bytes_it_did_not_write_fenced() {
    use phasecheck_model::ViolationKind::DataRace;
    let with = |stored: u32| {
        format!("protocol p\nbuffer d bytes 32\nrole t[1] {{\n  write(d, 1)\n  fence_proxy_async()\n  write(d, 1, offset = 1, bytes = 31)\n  copy_store_async(d, offset = {stored}, bytes = 1)\n  commit_group()\n  wait_group_read(0)\n}}\n")
    };
    assert_eq!(kinds_of(&with(0)), Default::default());
    assert_eq!(kinds_of(&with(1)), [DataRace].into_iter().collect());
}

/// A re-initialised barrier's "phase before the first" carries no history: a fresh-barrier
/// `wait_parity(b, 1)` after the re-init returns at once but orders the waiter after nobody, so
/// its read of a buffer another thread wrote with nothing ordering the two is a race at the read
/// (in the order write, then read), as it is without the wait.
#[test]
fn a_fresh_barrier_wait_after_a_reinit_orders_nothing() {
    let with = |wait: &str| {
        format!("protocol p\nbarrier b count 1\nbuffer d bytes 16\nrole a[1] {{\n  inval(b)\n  init(b)\n{wait}  read(d)\n}}\nrole w[1] {{\n  write(d, 1)\n}}\n")
    };
    for wait in ["  wait_parity(b, 1)\n", ""] {
        let v = reachable_violations(&model_of(&with(wait)));
        assert!(v.iter().any(|v| v.message.starts_with("a#0 reads d")), "{wait}: {v:#?}");
    }
}

/// An MMA that overwrites an accumulator another thread loaded with `tcgen05_ld` races with that
/// load unless the loader released it (the epilogue's arrive on an `empty` barrier the MMA
/// thread waits for): without that release the race is reported at the MMA.
#[test]
fn an_mma_over_an_accumulator_another_thread_loaded_unreleased_is_a_race() {
    let src = "protocol p\nbarrier full count 1\nbarrier again count 1\nbuffer a bytes 128\nbuffer acc bytes 512\nrole mma[1] {\n  tmem_alloc(acc, 64)\n  tcgen05_mma(acc, a)\n  tcgen05_commit(full)\n  wait_parity(full, 0)\n  tcgen05_mma(acc, a)\n  tcgen05_commit(again)\n  wait_parity(again, 0)\n}\nrole epi[1] {\n  wait_parity(full, 0)\n  tcgen05_ld(acc)\n  tcgen05_wait_ld()\n}\n";
    let v = reachable_violations(&model_of(src));
    assert!(
        v.iter()
            .any(|v| v.message.contains("issues tcgen05_mma overwriting") && v.message.contains("tcgen05_ld")),
        "{v:#?}"
    );
}

/// A CTA of a cluster that exits while a `cp_async` it issued is still in flight into its own
/// shared memory is `lifetime` as soon as it has exited, while its peer CTA still runs
/// (docs/semantics.md, "A CTA exiting under its peers"; docs/model.md, "Lifetime across CTAs"):
/// the copy tracks no barrier, and the report must still name the CTA that left, not only the
/// end of the whole kernel.
#[test]
fn a_cta_exiting_under_its_own_cp_async_is_a_lifetime_violation_while_its_peer_runs() {
    use phasecheck_model::ViolationKind::Lifetime;
    let src = "protocol p\ncluster 2\nbuffer d bytes 16\nrole w[1] {\n  if cta == 0 {\n    cp_async(d)\n  } else {\n    work\n  }\n}\n";
    let v = reachable_violations(&model_of(src));
    assert!(
        v.iter()
            .any(|v| v.kind == Lifetime && v.message.starts_with("CTA 0 has exited while the async copy into cta0.d")),
        "{v:#?}"
    );
}

/// The self-check's rule I-ARRIVED (docs/model.md, "Invariants": pending + arrivals made >=
/// expected) refuses a live barrier whose pending count went down with no arrival recorded (an
/// arrival lost by a faulty step), though its pending count alone is still in range.
#[test]
fn the_self_check_refuses_a_phase_that_lost_the_record_of_an_arrival() {
    let m = model_of("protocol p\nbarrier b count 2\nrole t[2] {\n  arrive(b)\n}\n");
    let s: State = m.init().next.unwrap();
    assert!(phasecheck_model::rt::selfcheck::state(&m, &s).is_ok());
    assert_eq!((s.barriers[0].pending, s.barriers[0].arrived, s.barriers[0].expected), (2, 0, 2));
    let mut lost = s.clone();
    lost.barriers[0].pending = 1;
    let e = phasecheck_model::rt::selfcheck::state(&m, &lost).unwrap_err();
    assert_eq!(e.rule, "I-ARRIVED", "{}", e.message);
}

/// Run `steps` from the initial state, each enabled where it is taken: `Ok(t)` a step of thread
/// `t`, `Err(buffer)` the landing of the copy in flight into that buffer. Returns the violations
/// met on the way.
fn run_schedule(m: &Model, steps: &[Result<u16, &str>]) -> Vec<phasecheck_model::rt::Violation> {
    let mut s = m.init().next.expect("an initial state");
    let mut out = Vec::new();
    let mut enabled = Vec::new();
    for step in steps {
        let a = match *step {
            Ok(t) => Action::Thread(t),
            Err(name) => {
                let d = m.proto.buffers.iter().position(|b| b.name == name).expect("a buffer");
                let i = s
                    .copies
                    .iter()
                    .position(|c| c.is_copy() && c.buf as usize == d)
                    .expect("a copy in flight");
                Action::Land(i as u16)
            }
        };
        enabled.clear();
        m.actions(&s, &mut enabled);
        assert!(enabled.contains(&a), "{a:?} is not enabled ({enabled:?})");
        let o = m.step(&s, a);
        out.extend(o.violations);
        match o.next {
            Some(n) => s = n,
            None => break,
        }
    }
    out
}

const RING_READ_AHEAD: &str = include_str!("../../specs/hopper/cp_async_arrive_ring_read_ahead.phase");
const RING_READ_AHEAD_FIXED: &str = include_str!("../../specs/hopper/cp_async_arrive_ring_read_ahead_fixed.phase");

/// The interleaving of docs/known-debts.md's false data-race: the producer issues s[0] and its
/// arrive-on (deferred: s[0] is in flight), then s[1], which lands first (no arrive-on after it
/// yet: carried into the producer's clock); its second arrive-on waits for s[0] too, and both
/// fire in s[0]'s landing; then the consumer runs.
const S1_LANDS_FIRST: [Result<u16, &str>; 6] = [Ok(0), Ok(0), Ok(0), Err("s[1]"), Ok(0), Err("s[0]")];

/// A two-stage cp.async ring with one `cp_async_arrive_noinc` per stage (CUTLASS's fp8
/// blockwise-scaling mainloop): waiting on full[1] orders the read of s[1] in every interleaving,
/// the one where s[1] lands before s[0] and before the producer's second arrive included (the
/// deferred arrive-on releases the producer's clock as of its `cp_async_arrive_noinc`, which
/// holds s[1]'s landing); reading s[1] after waiting on full[0] only is still a race, in that
/// interleaving too (full[0]'s arrive-on fires in the same landing, but its release predates
/// s[1]).
#[test]
fn a_cp_async_ring_orders_each_stage_by_its_own_arrive_on_only() {
    use phasecheck_model::ViolationKind::{DataRace, StaleRead};
    assert_eq!(kinds_of(RING_READ_AHEAD_FIXED), Default::default());
    assert_eq!(kinds_of(RING_READ_AHEAD), [DataRace, StaleRead].into_iter().collect());
    let consumer = [Ok(1), Ok(1), Ok(1), Ok(1)];
    let fixed = run_schedule(&model_of(RING_READ_AHEAD_FIXED), &[&S1_LANDS_FIRST[..], &consumer].concat());
    assert!(fixed.is_empty(), "{fixed:#?}");
    let early = run_schedule(&model_of(RING_READ_AHEAD), &[&S1_LANDS_FIRST[..], &consumer[..3]].concat());
    assert!(
        early.iter().any(|v| v.kind == DataRace && v.message.contains("reads s[1]")),
        "{early:#?}"
    );
}

/// What a deferred arrive-on releases is its issuer's history up to its `cp_async_arrive`, as
/// the arrive-on that runs at once (nothing in flight) releases it: a write the issuer makes
/// after the instruction races with a waiter on the phase whether or not the copy was still in
/// flight (the issuer's epoch ticks at the instruction), and one it made before, between the
/// copy and the instruction, is ordered either way.
#[test]
fn a_deferred_cp_async_arrive_on_releases_its_issuers_history_up_to_the_instruction() {
    use phasecheck_model::ViolationKind::DataRace;
    let src = |producer: &str| {
        format!("protocol p\nbarrier full count 1\nbuffer s bytes 16\nbuffer x bytes 16\nrole producer[1] {{\n{producer}}}\nrole consumer[1] {{\n  wait_parity(full, 0)\n  read(x)\n}}\n")
    };
    let after = src("  cp_async(s, offset = 0, bytes = 16)\n  cp_async_arrive_noinc(full)\n  write(x, 1)\n");
    assert_eq!(kinds_of(&after), [DataRace].into_iter().collect());
    // s lands only after the write: the arrive-on fires in its landing.
    let deferred = run_schedule(&model_of(&after), &[Ok(0), Ok(0), Ok(0), Err("s"), Ok(1), Ok(1)]);
    assert!(
        deferred.iter().any(|v| v.kind == DataRace && v.message.contains("reads x")),
        "{deferred:#?}"
    );
    let before = src("  cp_async(s, offset = 0, bytes = 16)\n  write(x, 1)\n  cp_async_arrive_noinc(full)\n");
    assert_eq!(kinds_of(&before), Default::default());
}
