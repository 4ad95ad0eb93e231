//! Forms the generator once refused and now generates (issue 30 item 3): a uniform role
//! under cluster scope, a per-lane offset in a uniform role, the warpgroup-scoped wgmma
//! (`warpgroup_mma` / `warpgroup_wait`), and TMA descriptors in shared memory (`tensormap`). Every library spec that used to be refused for one of
//! them generates in both backends (with its hardware-barrier form where it has one) and, where
//! NVRTC is installed (gpu-conformance/ci/setup-nvrtc.sh), compiles for sm_90a.

use phasecheck_gpu::codegen::{generate, generate_hw_barrier, hw_barrier_form, Backend, Kernel};
use phasecheck_gpu::nvrtc;
use phasecheck_model::spec::load as load_spec;
use std::path::PathBuf;

/// The library specs each of the refusals stopped, by form.
const SPECS: &[(&str, &[&str])] = &[
    (
        "uniform role under cluster scope",
        &[
            "hopper/cluster_uniform_remote_arrive_per_lane",
            "hopper/cluster_uniform_remote_arrive_per_lane_fixed",
        ],
    ),
    (
        "per-lane offset in a uniform role",
        &[
            "hopper/uniform_lane_fragments_overlap",
            "hopper/uniform_lane_fragments_overlap_fixed",
        ],
    ),
    (
        "warpgroup-scoped wgmma",
        &["hopper/warpgroup_release_before_wait", "hopper/warpgroup_release_before_wait_fixed"],
    ),
    (
        "TMA descriptor in shared memory (tensormap)",
        &[
            "hopper/tensormap_edit_without_fence",
            "hopper/tensormap_edit_without_fence_fixed",
            "hopper/tensormap_edit_under_copy",
            "hopper/tensormap_edit_under_copy_fixed",
        ],
    ),
];

fn kernels(name: &str, backend: Backend) -> Vec<Kernel> {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../specs/{name}.phase"));
    let spec = load_spec(&f, &[]).unwrap_or_else(|e| panic!("{e}"));
    let p = &spec.proto;
    let mut v = vec![generate(p, &spec.source, backend, 0).unwrap_or_else(|e| panic!("{name} [{}]: {e}", backend.name()))];
    if hw_barrier_form(p).is_ok() {
        v.push(generate_hw_barrier(p, &spec.source, backend, 1).unwrap_or_else(|e| panic!("{name} [{}] hw barrier: {e}", backend.name())));
    }
    v
}

#[test]
fn the_formerly_refused_library_specs_generate_in_both_backends() {
    for (form, names) in SPECS {
        for name in *names {
            for b in [Backend::Ptx, Backend::Libcu] {
                let ks = kernels(name, b);
                assert!(!ks.is_empty(), "{form}: {name}");
            }
        }
    }
}

#[test]
fn the_formerly_refused_library_specs_compile_for_sm90a() {
    if !nvrtc::available() {
        eprintln!("SKIPPED: libnvrtc not found (source gpu-conformance/ci/setup-nvrtc.sh to run this test)");
        return;
    }
    let mut failures = Vec::new();
    for (_, names) in SPECS {
        for name in *names {
            for b in [Backend::Ptx, Backend::Libcu] {
                for k in kernels(name, b) {
                    if let Err(log) = nvrtc::compile_source(&k.source(), &format!("{}.cu", k.symbol)) {
                        failures.push(format!("{name} {} [{}]:\n{log}", k.symbol, b.name()));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The tensormap specs run on the real instructions: the edit, the fence pair and the tensor copy
/// (with the `expect` probe) are each emitted where the spec has them, in both backends.
#[test]
fn the_tensormap_specs_use_real_tensor_maps() {
    for name in ["hopper/tensormap_edit_without_fence_fixed", "hopper/tensormap_edit_under_copy"] {
        for b in [Backend::Ptx, Backend::Libcu] {
            let k = &kernels(name, b)[0];
            for what in [
                "tensormap.replace.tile.global_address.shared::cta.b1024.b64",
                "fence.proxy.tensormap::generic.acquire.gpu",
                "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                "pc_tmap_edit(",
                "pc_tmap_fence(",
                "pc_tmap_copy(",
                "pc_tmap_probe(",
            ] {
                assert!(k.body.contains(what), "{name} [{}]: no {what}", b.name());
            }
        }
    }
    // Without the fence, the kernel has no fence either: the copy reads the slot as the
    // unfenced stores left it.
    for b in [Backend::Ptx, Backend::Libcu] {
        let k = &kernels("hopper/tensormap_edit_without_fence", b)[0];
        let from = k.body.find("// role ").expect("role functions");
        let to = k.body.find("}  // namespace").expect("the namespace's end");
        let roles = &k.body[from..to];
        assert!(
            !roles.contains("pc_tmap_fence("),
            "the unfenced spec's roles fence nothing [{}]",
            b.name()
        );
    }
}

/// The named barriers of a cluster spec without a cluster barrier run on the hardware in its
/// hardware-barrier form: `barrier.sync` in both backends, model threads counted finished in every
/// CTA, and a keeper warp (the block's last warp) waiting for the count before it meets the other
/// keepers on `barrier.cluster`; the software form keeps the bounded named barrier.
#[test]
fn a_cluster_without_a_cluster_barrier_runs_its_named_barriers_on_the_hardware() {
    for name in [
        "hopper/cluster_named_barrier_orders_own_cta",
        "hopper/cluster_named_barrier_orders_own_cta_fixed",
    ] {
        for b in [Backend::Ptx, Backend::Libcu] {
            let ks = kernels(name, b);
            assert_eq!(ks.len(), 2, "{name} [{}]: a hardware-barrier form", b.name());
            let (soft, hw) = (&ks[0], &ks[1]);
            assert!(
                !soft.body.contains("barrier.sync %0, %1") && soft.body.contains("pc_named("),
                "{name}"
            );
            assert!(
                hw.body.contains("barrier.sync %0, %1") && !hw.body.contains("pc_named(th"),
                "{name}"
            );
            assert!(hw.body.contains("the keeper warp") && hw.body.contains("s.cfin < NT"), "{name}");
            assert_eq!(hw.block_dim % 32, 0, "{name}: the keeper is a whole warp");
            assert_eq!(hw.block_dim, soft.block_dim.div_ceil(32) * 32 + 32, "{name}");
        }
    }
}
