//! `phasecheck import` on hand-written PTX (tests/import_fixtures/): every mapped form comes
//! out as its statement with its `// from` line, an unmapped barrier op is reported
//! `unresolved` (exit 3, never dropped), malformed PTX is one located sentence (exit 2).

use std::path::Path;
use std::process::Command;

fn import(fixture: &str, args: &[&str]) -> (String, String, i32) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import_fixtures").join(fixture);
    let r = Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .arg("import")
        .arg(path)
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&r.stdout).into_owned(),
        String::from_utf8_lossy(&r.stderr).into_owned(),
        r.status.code().unwrap_or(-1),
    )
}

#[test]
fn every_mapped_form_becomes_its_statement() {
    let (spec, stderr, code) = import("forms.ptx", &[]);
    assert_eq!(code, 0, "{stderr}");
    for (stmt, line) in [
        ("init(bars_0, 1)", 31),
        ("init(bars_1, 32)", 32),
        ("fence_mbarrier_init()", 34),
        ("syncthreads", 36),
        ("expect_tx(bars_0, 64)", 47),
        ("copy_async(tile, bars_0)", 51),
        ("arrive(bars_0)", 52),
        ("arrive(bars_2, 2)", 53),
        ("syncwarp(0xffffffff)", 55),
        ("wait_parity(bars_0, 0)", 61),
        ("read(tile, offset = 0, bytes = 4)", 65),
        ("let t1 = arrive(bars_1)", 68),
        ("wait(bars_1, t1)", 70),
        ("bar_arrive(1, 64)", 84),
        ("fence_proxy_async()", 88),
    ] {
        let l = spec
            .lines()
            .find(|l| l.trim_start().starts_with(stmt))
            .unwrap_or_else(|| panic!("no `{stmt}` in\n{spec}"));
        assert!(l.ends_with(&format!("// from forms.ptx:{line}")), "{l}");
    }
    // the loop's trip count came through a .func call (half of 4): two rounds, folded back
    assert!(spec.contains("  for r in 0..2 {\n    bar_arrive(1, 64)"), "{spec}");
    // lane 0 alone produces: an elect() block in a warp-uniform role
    assert!(spec.contains("role warp0 warps 1 uniform"));
    assert!(spec.contains("if e2 == 1 {"));
    assert!(
        stderr.contains("exact") && stderr.contains("polling loop -> wait_parity"),
        "{stderr}"
    );
    assert!(stderr.contains("mbarrier.test_wait polling loop -> wait"), "{stderr}");
    phasecheck_verifier::api::parse_spec("forms", &spec, &[]).unwrap();
}

#[test]
fn an_unmapped_barrier_op_is_unresolved_not_dropped() {
    let (spec, stderr, code) = import("unmapped.ptx", &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("unresolved  unmapped.ptx:13") && stderr.contains("mbarrier.pending_count"),
        "{stderr}"
    );
    assert!(spec.contains("arrive(bar"), "{spec}");
}

#[test]
fn malformed_ptx_is_one_located_sentence() {
    let (_, stderr, code) = import("malformed.ptx", &[]);
    assert_eq!(code, 2);
    assert!(stderr.contains("malformed.ptx:6:19: error: expected `]` here"), "{stderr}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn a_kernel_without_a_block_size_asks_for_one() {
    let (_, stderr, code) = import("malformed.ptx", &["--block", "0"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn cuda_input_without_nvrtc_says_so() {
    if phasecheck_gpu::nvrtc::available() {
        return; // covered by tests/import_kernels.rs
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("import/kernels/tma_ring.cu");
    let r = Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .arg("import")
        .arg(path)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("NVRTC is not available"));
}
