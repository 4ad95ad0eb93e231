//! Cluster scope (issue 13 item 9): what the `specs/hopper/cluster_*` expect lines cannot say.
//! The cluster barrier's undefined behaviour and its exited threads, the rank and mask checks,
//! CTA-local thread identities, the front end's cluster errors, and that `cluster 1` is exactly
//! the protocol without a `cluster` line.

mod common;

/// `phasecheck check` of `source` written to a fresh file: (exit status, stdout + stderr).
fn check(name: &str, source: &str) -> (i32, String) {
    common::check_source("cluster", name, source)
}

fn states(out: &str) -> &str {
    let at = out.find("stats:").expect("a stats line");
    out[at..].split(" states").next().unwrap()
}

#[test]
fn a_second_cluster_arrive_before_the_wait_is_undefined_behaviour() {
    let (c, out) = check(
        "double_arrive",
        "protocol p\ncluster 2\nrole w[1] {\n  cluster_arrive()\n  cluster_arrive()\n  cluster_wait()\n}\n",
    );
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("verdict: violated (assertion)"), "{out}");
    assert!(
        out.contains("cluster_arrive while its previous cluster_arrive has not been waited for"),
        "{out}"
    );
}

#[test]
fn a_cluster_wait_without_an_arrive_is_undefined_behaviour() {
    let (c, out) = check("wait_only", "protocol p\ncluster 2\nrole w[1] {\n  cluster_wait()\n}\n");
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("cluster_wait without a cluster_arrive before it"), "{out}");
}

#[test]
fn threads_that_exited_count_as_arrived_at_the_cluster_barrier() {
    // CTA 1 exits at once; CTA 0's cluster_sync completes with its own arrival alone.
    let (c, out) = check(
        "exited_arrive",
        "protocol p\nexpect holds\ncluster 2\nrole w[1] {\n  if cta == 0 { cluster_sync() }\n}\n",
    );
    assert_eq!(c, 0, "{out}");
    assert!(out.contains("verdict: holds"), "{out}");
}

#[test]
fn a_thread_that_never_arrives_leaves_the_cluster_waiting() {
    // CTA 1 waits for an arrival CTA 0 makes only after the cluster barrier: neither moves.
    let (c, out) = check(
        "never_arrives",
        "protocol p\ncluster 2\nbarrier go count 1\nrole w[1] {\n  if cta == 0 {\n    cluster_sync()\n    arrive(go, cta = 1)\n  } else {\n    wait_parity(go, 0)\n    cluster_sync()\n  }\n}\n",
    );
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("verdict: violated (deadlock)"), "{out}");
    assert!(out.contains("waits at cluster_wait"), "{out}");
}

#[test]
fn a_rank_outside_the_cluster_and_an_empty_multicast_mask_are_undefined_behaviour() {
    let (c, out) = check(
        "rank",
        "protocol p\ncluster 2\nbarrier b count 2\nrole w[1] {\n  cluster_sync()\n  arrive(b, cta = cta + 1)\n}\n",
    );
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("CTA rank 2 is outside the cluster of 2 CTAs"), "{out}");
    let (c, out) = check(
        "mask",
        "protocol p\ncluster 2\nbarrier b count 1\nbuffer t bytes 16\nrole w[1] {\n  cluster_sync()\n  arrive_expect_tx(b, 16)\n  copy_async(t, b, multicast = 4)\n}\n",
    );
    assert_eq!(c, 1, "{out}");
    assert!(
        out.contains("multicast mask 0x4 names no CTA or a CTA outside the cluster of 2"),
        "{out}"
    );
}

#[test]
fn thread_identities_are_cta_local() {
    // Whole-warp roles: CTA 1's first lane is model thread 4 (warp 2), but sees gtid 0, warp 0.
    let (c, out) = check(
        "identity",
        "protocol p\nexpect holds\nwarp_size 2\ncluster 2\nrole a[1] { assert gtid == 0 && warp == 0 && lane == 0 }\nrole b warps 1 { assert gtid == 2 + tid && warp == 1 && lane == tid && cta < 2 }\n",
    );
    assert_eq!(c, 0, "{out}");
    assert!(out.contains("threads: cta0.a[1] cta0.b[2] cta1.a[1] cta1.b[2]"), "{out}");
}

#[test]
fn cluster_one_is_the_protocol_without_a_cluster_line() {
    let body = "barrier full count 1\nbuffer tile bytes 64\nrole producer[1] {\n  arrive_expect_tx(full, 64)\n  copy_async(tile, full)\n}\nrole consumer[2] {\n  wait_parity(full, 0)\n  read(tile, expect = 0)\n}\n";
    let (c0, plain) = check("plain", &format!("protocol p\nexpect holds\n{body}"));
    let (c1, one) = check("one", &format!("protocol p\nexpect holds\ncluster 1\n{body}"));
    assert_eq!((c0, c1), (0, 0), "{plain}\n{one}");
    assert_eq!(states(&plain), states(&one));
    assert!(one.contains("threads: producer[1] consumer[2]"), "{one}");
}

#[test]
fn each_cta_of_a_cluster_has_its_own_named_barriers() {
    // Two warps per CTA: a count of 2 is met in each CTA; a count of 4 would be met only if the
    // four warps of the cluster shared the barrier, which they do not (PTX: sixteen per CTA).
    let (c, out) = check(
        "per_cta",
        "protocol p\nexpect holds\ncluster 2\nwarp_size 1\nrole w[2] { bar_sync(1, 2) }\n",
    );
    assert_eq!(c, 0, "{out}");
    let (c, out) = check(
        "across",
        "protocol p\nexpect deadlock\ncluster 2\nwarp_size 1\nrole w[2] { bar_sync(1, 4) }\n",
    );
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("deadlock"), "{out}");
}

#[test]
fn the_front_end_rejects_bad_clusters_with_their_codes() {
    let (c, out) = check("too_big", "protocol p\ncluster 9\nrole w[1] { work }\n");
    assert_eq!(c, 2, "{out}");
    assert!(out.contains("error[E114]: cluster is 9"), "{out}");
    // A uniform role in a cluster is one agent per warp in each CTA (E116 is retired): each
    // CTA's agent arrives once per lane on its own count-2 barrier.
    let (c, out) = check(
        "uniform",
        "protocol p\ncluster 2\nwarp_size 2\nbarrier b count 2\nrole c warps 1 uniform { arrive_and_wait(b) }\n",
    );
    assert_eq!(c, 0, "{out}");
    // ... but the cluster barrier inside an elected block would be one lane's arrival.
    let (c, out) = check(
        "uniform_elected_cluster_barrier",
        "protocol p\ncluster 2\nwarp_size 2\nrole c warps 1 uniform {\n  let e = elect()\n  if e == 1 { cluster_sync() }\n}\n",
    );
    assert_eq!(c, 2, "{out}");
    assert!(out.contains("error[E113]"), "{out}");
    let (c, out) = check(
        "remote_wait",
        "protocol p\ncluster 2\nbarrier b count 1\nrole w[1] { wait_parity(b, 0, cta = 1) }\n",
    );
    assert_eq!(c, 2, "{out}");
    assert!(out.contains("error[E007]"), "{out}");
    let (c, out) = check(
        "in_completion",
        "protocol p\ncluster 2\nbarrier b count 1 completion f\ncompletion f { cluster_sync() }\nrole w[1] { arrive(b) }\n",
    );
    assert_eq!(c, 2, "{out}");
    assert!(out.contains("error[E030]"), "{out}");
}

#[test]
fn a_remote_arrive_yields_no_token() {
    let (c, out) = check(
        "remote_token",
        "protocol p\ncluster 2\nbarrier b count 1\nrole w[1] { let t = arrive(b, cta = 1) }\n",
    );
    assert_eq!(c, 2, "{out}");
    assert!(
        out.contains("error[E027]: `arrive` with `cta = ...` yields no value to store in `t`"),
        "{out}"
    );
}

#[test]
fn a_remote_arrive_expect_tx_announces_the_bytes_on_the_peers_barrier() {
    // CTA 1 announces the bytes of the copy CTA 0 issues into its own tile: the copy may land
    // before the announcement (the tx-count dips below zero), and the phase still completes only
    // with both.
    let (c, out) = check(
        "remote_expect_tx",
        "protocol p\nexpect holds\ncluster 2\nbarrier full count 1\nbuffer t bytes 64\nrole w[1] {\n  cluster_sync()\n  if cta == 1 {\n    arrive_expect_tx(full, 64, cta = 0)\n  } else {\n    copy_async(t, full)\n    wait_parity(full, 0)\n    read(t, expect = 0)\n  }\n}\n",
    );
    assert_eq!(c, 0, "{out}");
    assert!(out.contains("verdict: holds"), "{out}");
}

/// A CTA-to-CTA bulk copy (`copy_async(DST, B, cta = R, from = SRC)`) with one source byte
/// range: the copy carries the version SRC holds, and what the trigger specs cannot say.
const COPY_FROM: &str = "protocol p\ncluster 2\nbarrier full count 1\nbuffer stage bytes 32\nbuffer tile bytes 32\nrole w[1] {\n  cluster_sync()\n  if cta == 0 {\n    write(stage, 5)\n    fence_proxy_async()\n    arrive_expect_tx(full, 32, cta = 1)\n    copy_async(tile, full, cta = 1, from = stage)\n    EXIT\n  } else {\n    wait_parity(full, 0)\n    read(tile, expect = 5)\n  }\n  cluster_sync()\n}\n";

#[test]
fn a_copy_from_shared_memory_carries_the_source_version() {
    let (c, out) = check("copy_from_version", &COPY_FROM.replace("EXIT", "work"));
    assert_eq!(c, 0, "{out}");
    assert!(out.contains("verdict: holds"), "{out}");
    // The peer expecting another version than the source holds is a stale read.
    let (c, out) = check(
        "copy_from_stale",
        &COPY_FROM.replace("EXIT", "work").replace("expect = 5", "expect = 4"),
    );
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("verdict: violated (stale-read)"), "{out}");
}

#[test]
fn the_issuing_cta_must_not_exit_while_its_copy_reads_the_source() {
    // CTA 0 leaves right after the issue: the copy may still read its shared memory.
    let src = COPY_FROM.replace("EXIT", "return");
    let (c, out) = check("copy_from_exit", &src);
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("lifetime"), "{out}");
    assert!(out.contains("still reads it"), "{out}");
}

#[test]
fn a_copy_from_shared_memory_is_refused_without_a_cta_or_with_a_version() {
    for (name, from, says) in [
        ("no_cta", "copy_async(tile, full, cta = 1, from = stage)", "add `cta = R`"),
        ("version", "copy_async(tile, full, cta = 1, from = stage)", "takes no `version =`"),
        ("multicast", "copy_async(tile, full, cta = 1, from = stage)", "add `cta = R`"),
    ] {
        let with = match name {
            "no_cta" => "copy_async(tile, full, from = stage)",
            "version" => "copy_async(tile, full, cta = 1, from = stage, version = 2)",
            _ => "copy_async(tile, full, multicast = 3, from = stage)",
        };
        let (c, out) = check(name, &COPY_FROM.replace("EXIT", "work").replace(from, with));
        assert_eq!(c, 2, "{out}");
        assert!(out.contains("E007") && out.contains(says), "{name}: {out}");
        assert!(out.contains(":12:"), "{name}: the diagnostic points at the copy's line: {out}");
    }
}

/// The start-up of every CUTLASS cluster kernel, with declared barriers: `fence_mbarrier_init()`
/// then `cluster_arrive_relaxed()` and `cluster_wait()` publishes the inits to the peer, as a
/// releasing `cluster_sync()` does; the relaxed arrival alone, or with the fence after it, does not.
#[test]
fn a_fence_before_a_relaxed_cluster_arrival_publishes_the_inits_to_the_peers() {
    let spec = |start: &str| {
        format!(
            "protocol p\ncluster 2\nbarrier go count 1\nrole w[1] {{\n{start}  arrive(go, cta = 1 - cta)\n  wait_parity(go, 0)\n  cluster_sync()\n}}\n"
        )
    };
    for (name, start, holds) in [
        ("sync", "  cluster_sync()\n", true),
        (
            "fenced",
            "  fence_mbarrier_init()\n  cluster_arrive_relaxed()\n  cluster_wait()\n",
            true,
        ),
        ("unfenced", "  cluster_arrive_relaxed()\n  cluster_wait()\n", false),
        (
            "late_fence",
            "  cluster_arrive_relaxed()\n  fence_mbarrier_init()\n  cluster_wait()\n",
            false,
        ),
    ] {
        let (c, out) = check(name, &spec(start));
        if holds {
            assert_eq!(c, 0, "{name}: {out}");
            assert!(out.contains("verdict: holds"), "{name}: {out}");
        } else {
            assert_eq!(c, 1, "{name}: {out}");
            assert!(out.contains("verdict: violated (uninitialized)"), "{name}: {out}");
            assert!(out.contains("reaches a barrier of CTA"), "{name}: {out}");
        }
    }
}

/// `fence.mbarrier_init` is a release fence for inits only: a DSMEM write made before the fenced
/// relaxed arrival is still not ordered before the peer's read (a `data-race`), while the init
/// it covers is.
#[test]
fn a_fenced_relaxed_cluster_arrival_still_publishes_no_write() {
    let (c, out) = check(
        "fenced_write",
        "protocol p\ncluster 2\nbuffer box bytes 16\nrole w[1] {\n  cluster_sync()\n  write(box, 1, cta = 1 - cta)\n  fence_mbarrier_init()\n  cluster_arrive_relaxed()\n  cluster_wait()\n  read(box, expect = 1)\n  cluster_sync()\n}\n",
    );
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("verdict: violated (data-race)"), "{out}");
}

/// A manual `init` by one thread of the CTA reaches the CTA's other threads and the peers through
/// the initialising thread's fence and relaxed arrival (CUTLASS: the init in one warp, the fence
/// and the relaxed cluster barrier in all); a thread that learns of the init only through a
/// relaxed arrival with no fence before it does not see it.
#[test]
fn a_fenced_relaxed_cluster_arrival_publishes_a_manual_init_to_its_own_cta_too() {
    let spec = |fence_first: bool| {
        let start = if fence_first {
            "  fence_mbarrier_init()\n  cluster_arrive_relaxed()\n"
        } else {
            "  cluster_arrive_relaxed()\n  fence_mbarrier_init()\n"
        };
        format!(
            "protocol p\ncluster 2\nbarrier go count 1 manual_init\nrole w[2] {{\n  if tid == 0 {{ init(go) }}\n{start}  cluster_wait()\n  if tid == 0 {{ arrive(go) }} else {{ wait_parity(go, 0) }}\n  cluster_sync()\n}}\n"
        )
    };
    let (c, out) = check("manual_fenced", &spec(true));
    assert_eq!(c, 0, "{out}");
    assert!(out.contains("verdict: holds"), "{out}");
    let (c, out) = check("manual_late_fence", &spec(false));
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("verdict: violated (uninitialized)"), "{out}");
    assert!(out.contains("before the init by"), "{out}");
}

/// A stage released on every CTA's `empty` by each CTA's consumer (CUTLASS's multicast
/// pipelines) needs a count per CTA: with a count for one, the root cause is the count, seen as
/// one round of the consumer role across the CTAs (each waited for its own CTA's copy of the
/// same stage), not the first arrival that lands in the next phase.
#[test]
fn a_count_for_one_cta_is_blamed_on_the_count_across_the_ctas() {
    let spec = |count: u32| {
        format!(
            "protocol p\ncluster 2\nbarrier full count 1\nbarrier empty count {count}\nbuffer tile bytes 64\n\
             role producer[1] {{\n  cluster_sync()\n  arrive_expect_tx(full, 64)\n  copy_async(tile, full, version = 1)\n  wait_parity(empty, 0)\n  cluster_sync()\n}}\n\
             role consumer[1] {{\n  cluster_sync()\n  wait_parity(full, 0)\n  read(tile, expect = 1)\n  arrive(empty, cta = 0)\n  arrive(empty, cta = 1)\n  cluster_sync()\n}}\n"
        )
    };
    let (c, out) = check("count_one_cta", &spec(1));
    assert_eq!(c, 1, "{out}");
    assert!(
        out.contains("root cause: count mismatch: 2 threads of role consumer arrive per round"),
        "{out}"
    );
    let (c, out) = check("count_both_ctas", &spec(2));
    assert_eq!(c, 0, "{out}");
}
