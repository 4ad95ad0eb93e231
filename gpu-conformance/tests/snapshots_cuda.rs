//! Snapshots of the generated CUDA (both backends) for specs that cover every kind of statement:
//! a change in code generation shows up as a readable diff.

use phasecheck_gpu::codegen::{generate, Backend};
use phasecheck_model::spec::load as load_spec;
use std::path::PathBuf;

fn emit(name: &str, backend: Backend) -> String {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.phase"));
    let spec = load_spec(&f, &[]).unwrap();
    match generate(&spec.proto, &spec.source, backend, 0) {
        Ok(k) => k.body, // the kernel itself; the shared prelude is snapshotted once below
        Err(e) => e.to_string(),
    }
}

macro_rules! snap {
    ($test:ident, $name:literal, $backend:expr) => {
        #[test]
        fn $test() {
            insta::assert_snapshot!(emit($name, $backend));
        }
    };
}

snap!(double_buffer_ptx, "double_buffer", Backend::Ptx);
snap!(double_buffer_libcu, "double_buffer", Backend::Libcu);
snap!(wrong_parity_ptx, "wrong_parity", Backend::Ptx);
snap!(completion_rotate_libcu, "completion_rotate", Backend::Libcu);
snap!(completion_rotate_ptx_not_expressible, "completion_rotate", Backend::Ptx);
snap!(memcpy_try_libcu, "memcpy_try", Backend::Libcu);
snap!(memcpy_try_ptx, "memcpy_try", Backend::Ptx);
snap!(commit_warp_ptx, "commit_warp", Backend::Ptx);
// A uniform agent's lanes each at their own offset (`offset = lane * 16`): the offset is
// evaluated with the lane's identity, `th.lane + u.lane`.
snap!(uniform_lane_offset_ptx, "uniform_lane_offset", Backend::Ptx);
snap!(uniform_lane_offset_libcu, "uniform_lane_offset", Backend::Libcu);
// A uniform role under cluster scope: remote arrives on every lane, the software cluster barrier
// arrived on once per agent (its leader), left by the agent's last lane.
snap!(cluster_uniform_ptx, "cluster_uniform", Backend::Ptx);
// The warpgroup-scoped wgmma: one helper warpgroup for the spec's warpgroup, its four agents'
// issues counted into one sequence of groups.
snap!(warpgroup_mma_ptx, "warpgroup_mma", Backend::Ptx);
snap!(warpgroup_mma_libcu, "warpgroup_mma", Backend::Libcu);
snap!(cluster_uniform_libcu, "cluster_uniform", Backend::Libcu);
// A TMA descriptor in shared memory: the host's tensor map copied in, edited with
// tensormap.replace, fenced for the tensormap proxy, and read by cp.async.bulk.tensor through its
// global slot (with the probe that checks `expect`).
snap!(tensormap_group_ptx, "tensormap_group", Backend::Ptx);
snap!(tensormap_group_libcu, "tensormap_group", Backend::Libcu);
// Counters in a cluster: the own CTA's add and a peer's (mapa.shared::cluster, then
// red.relaxed.cluster.shared::cluster.add.u32), and plain reads of the own and the peer's
// counter recorded with their values.
snap!(counter_cluster_ptx, "counter_cluster", Backend::Ptx);
snap!(counter_cluster_libcu, "counter_cluster", Backend::Libcu);

/// ... and its hardware cluster-barrier form: every lane arrives on `barrier.cluster`, and every
/// lane stays in the exit loop until the cluster's lanes are done.
#[test]
fn cluster_uniform_ptx_hw_barrier() {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cluster_uniform.phase");
    let spec = load_spec(&f, &[]).unwrap();
    let k = phasecheck_gpu::codegen::generate_hw_barrier(&spec.proto, &spec.source, Backend::Ptx, 0).unwrap();
    assert!(k.body.contains("s.cfin < NL * 2"), "the exit loop counts lanes");
    insta::assert_snapshot!(k.body);
}

/// The hardware-batched commit (`stress-hw-commit`): one arrival per group of lanes the hardware
/// runs together, nothing of the emulation.
#[test]
fn commit_warp_ptx_hw_commit() {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/commit_warp.phase");
    let spec = load_spec(&f, &[]).unwrap();
    let k = phasecheck_gpu::codegen::generate_hw_commit(&spec.proto, &spec.source, Backend::Ptx, 0).unwrap();
    assert!(k.symbol.ends_with("_hwc"));
    assert!(!k.body.contains("pc_commit_group"), "no emulation in the hardware form");
    insta::assert_snapshot!(k.body);
}

/// The hardware-barrier form (`stress-hw-barrier`): the named barriers are the hardware's own
/// `barrier.sync` / `barrier.arrive`, a model warp counted as a hardware warp.
#[test]
fn named_pingpong_ptx_hw_barrier() {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/named_pingpong.phase");
    let spec = load_spec(&f, &[]).unwrap();
    let k = phasecheck_gpu::codegen::generate_hw_barrier(&spec.proto, &spec.source, Backend::Ptx, 0).unwrap();
    assert!(k.symbol.ends_with("_hwb"));
    assert!(!k.body.contains("pc_named("), "no software named barrier in the hardware form");
    insta::assert_snapshot!(k.body);
}

#[test]
fn prelude_libcu() {
    insta::assert_snapshot!(phasecheck_gpu::codegen::prelude_text(Backend::Libcu));
}

#[test]
fn every_wait_is_bounded() {
    // No unbounded libcu++ wait may appear in generated code: each goes through a %globaltimer loop.
    for name in ["double_buffer", "wrong_parity", "completion_rotate", "memcpy_try", "commit_warp"] {
        for b in [Backend::Ptx, Backend::Libcu] {
            let body = emit(name, b);
            for bad in [".wait(", ".wait_parity(", ".arrive_and_wait(", "__syncthreads();\n  if (me"] {
                if bad.starts_with("__sync") {
                    continue;
                }
                assert!(!body.contains(bad), "{name} [{}] has an unbounded {bad}", b.name());
            }
        }
    }
}

snap!(cluster_mailbox_ptx, "cluster_mailbox", Backend::Ptx);
snap!(named_pingpong_ptx, "named_pingpong", Backend::Ptx);

fn kernel_of(name: &str, backend: Backend) -> phasecheck_gpu::codegen::Kernel {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.phase"));
    let spec = load_spec(&f, &[]).unwrap();
    generate(&spec.proto, &spec.source, backend, 0).unwrap()
}

/// A cluster spec runs one execution per cluster: the kernel carries the cluster dimension, each
/// CTA runs its own model threads (block_dim counts one CTA), and the cluster shares one record.
#[test]
fn a_cluster_kernel_runs_one_execution_per_cluster_of_ctas() {
    for b in [Backend::Ptx, Backend::Libcu] {
        let k = kernel_of("cluster_mailbox", b);
        assert_eq!(k.cluster, 2);
        assert_eq!(k.threads, 2, "one worker per CTA");
        assert_eq!(k.block_dim, 1, "the block is one CTA's threads");
        assert!(k.body.contains("__cluster_dims__(2, 1, 1)"));
        assert!(k.body.contains("out + (i64)(blockIdx.x / 2)"), "two CTAs share a record");
        // The hardware's remote arrive and multicast copy; cluster-scope waits.
        assert!(k.body.contains("pc_mbar_arrive_remote("));
        assert!(k.body.contains("pc_bulk_copy_multicast("));
        assert!(k.body.contains("_cl(th, "), "waits acquire at cluster scope");
        // The spec's cluster barrier is bounded: never the hardware wait inside spec code.
        let roles = &k.body[..k.body.find("extern \"C\"").unwrap()];
        assert!(
            !roles.contains("pc_cluster_barrier_hw"),
            "spec code uses the bounded software cluster barrier"
        );
        assert!(roles.contains("pc_cluster_wait("));
    }
    let single = kernel_of("double_buffer", Backend::Ptx);
    assert_eq!(single.cluster, 1);
    assert!(!single.body.contains("__cluster_dims__"));
}

/// Named barriers run as bounded software barriers with the hardware's warp-granular counting.
#[test]
fn named_barriers_are_generated_bounded() {
    for b in [Backend::Ptx, Backend::Libcu] {
        let k = kernel_of("named_pingpong", b);
        assert!(k.body.contains("pc_named("), "{}", b.name());
        assert!(!k.body.contains("asm volatile(\"bar"), "no hardware bar.sync/bar.arrive: unbounded");
    }
}

snap!(lagged_token_ptx, "lagged_token", Backend::Ptx);

/// A token copied into another local (`prev = t`) is still a token: the wait on it is a token
/// wait, never a parity wait on the state's low bit (which hung every block of the lagged split
/// arrive/wait on the H200 where no allowed outcome hangs).
#[test]
fn a_copied_token_is_waited_on_as_a_token() {
    for b in [Backend::Ptx, Backend::Libcu] {
        let body = emit("lagged_token", b);
        assert!(body.contains("pc_mbar_wait_token"), "{body}");
        assert!(!body.contains("pc_mbar_wait_parity"), "{body}");
    }
}

/// A copy of a version no row of the copy source holds is refused where it is issued
/// (unsupported), never copied as the out-of-range row's -2 (which read as a wrong version in
/// every block of a FlashAttention-3 protocol copying version 100 on the H200).
#[test]
fn a_copy_version_past_the_source_rows_is_refused() {
    for b in [Backend::Ptx, Backend::Libcu] {
        let body = emit("double_buffer", b);
        assert!(body.contains("if (!pc_version_ok(th, version)) return;"), "{body}");
    }
    let prelude = phasecheck_gpu::codegen::prelude_text(Backend::Ptx);
    assert!(prelude.contains("#define PC_SRC_VERSIONS 256"));
}

/// The hardware form of a cluster kernel (`stress-hw-barrier`): the spec's cluster barrier is the
/// hardware's own `barrier.cluster.arrive` / `.wait`, and a finished thread, which cannot exit
/// while a peer may reach its shared memory, stands in for an exited one: it arrives on every
/// later phase until its CTA counts the whole cluster finished.
#[test]
fn cluster_mailbox_ptx_hw_barrier() {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cluster_mailbox.phase");
    let spec = load_spec(&f, &[]).unwrap();
    let k = phasecheck_gpu::codegen::generate_hw_barrier(&spec.proto, &spec.source, Backend::Ptx, 0).unwrap();
    assert!(k.symbol.ends_with("_hwb"));
    assert!(
        !k.body.contains("pc_cluster_arrive(") && !k.body.contains("pc_cluster_wait("),
        "no software cluster barrier"
    );
    assert!(
        !k.body.contains("pc_cluster_leave("),
        "a finished thread does not leave a software barrier"
    );
    assert!(k
        .body
        .contains("barrier.cluster.arrive.release;\" ::: \"memory\");  // the hardware's own"));
    assert!(k.body.contains("barrier.cluster.wait.acquire;\" ::: \"memory\");  // unbounded"));
    assert!(k
        .body
        .contains("for (int r = 0; r < 2; r++) atomicAdd((int*)pc_mapa((const void*)&s.cfin, r), 1);"));
    assert!(
        k.body.contains("while (*(volatile int*)&s.cfin < NT)"),
        "the exit loop reads its own CTA's count"
    );
    assert!(
        !k.body.contains("pc_cluster_barrier_hw();  // no CTA exits"),
        "the exit is the count-and-arrive loop, not one more barrier.cluster that a short spec thread would shift"
    );
    insta::assert_snapshot!(k.body);
}

/// A spec's wgmma runs on the hardware's `wgmma.mma_async`: the issuing agent posts to a helper
/// warpgroup placed after the model's threads, which reads the spec's buffer through descriptors.
#[test]
fn a_wgmma_agent_gets_a_helper_warpgroup_that_issues_real_wgmma() {
    use phasecheck_gpu::codegen::{wgmma_agents, wgmma_hw_form};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let spec = load_spec(&root.join("specs/hopper/wgmma_release_before_wait_fixed.phase"), &[]).unwrap();
    for b in [Backend::Ptx, Backend::Libcu] {
        let k = generate(&spec.proto, &spec.source, b, 0).unwrap();
        assert_eq!(k.wgmma_emulated, None);
        assert_eq!(wgmma_agents(&spec.proto), vec![1], "the consumer issues wgmma");
        // Two model threads, rounded up to one warpgroup, then the consumer's helper warpgroup.
        assert_eq!(k.block_dim, 256);
        assert!(k.body.contains("constexpr int WG_BASE = 128;"));
        assert!(k.body.contains("__device__ const int wg_of[NT] = {-1, 0};"));
        assert!(k.body.contains("wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.u8"));
        assert!(k.body.contains("pc_wg_mma(th, &s.wg[wg_of[th.t]], 1, ops, bytes, -1LL)"));
        assert!(k.body.contains("pc_wg_wait(th, &s.wg[wg_of[th.t]], 0LL)"));
        assert!(k.body.contains("pc_wg_serve(&s.wg[(threadIdx.x - WG_BASE) / 128]"));
        assert!(!k.body.contains("wgmma_async, emulated"), "no bulk-store emulation left");
    }
    // A 64-byte operand is under the smallest descriptor read: the kernel emulates it, and says why.
    let dir = std::env::temp_dir().join(format!("phasecheck-wgmma-small-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("small.phase");
    std::fs::write(
        &f,
        "protocol small\nexpect holds\nbarrier full count 1\nbuffer a bytes 64\nrole p[1] {\n  arrive_expect_tx(full, 64)\n  copy_async(a, full)\n  wait_parity(full, 0)\n  wgmma_async(a)\n  wgmma_wait(0)\n}\n",
    )
    .unwrap();
    let small = load_spec(&f, &[]).unwrap_or_else(|e| panic!("{e}"));
    let why = wgmma_hw_form(&small.proto, 1).unwrap_err();
    assert!(why.contains("64 bytes"), "{why}");
    let k = generate(&small.proto, &small.source, Backend::Ptx, 0).unwrap();
    assert!(k.wgmma_emulated.is_some());
    assert!(k.body.contains("wgmma_async, emulated"));
    std::fs::remove_dir_all(&dir).ok();
}
