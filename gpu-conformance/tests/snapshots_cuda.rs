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
