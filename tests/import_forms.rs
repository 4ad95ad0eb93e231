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
        ("let tok1 = arrive(bars_1)", 68),
        ("wait(bars_1, tok1)", 70),
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

/// Some spec line starts with `stmt` (after indentation) and cites `FILE:LINE`.
fn statement_from(spec: &str, stmt: &str, file: &str, line: usize) {
    let from = format!("// from {file}:{line}");
    assert!(
        spec.lines().any(|l| l.trim_start().starts_with(stmt) && l.ends_with(&from)),
        "no `{stmt}` {from} in\n{spec}"
    );
}

#[test]
fn every_other_mapped_form_becomes_its_statement() {
    let (spec, stderr, code) = import("more_forms.ptx", &["--tma-bytes", "1=128"]);
    assert_eq!(code, 0, "{stderr}");
    for (stmt, line) in [
        ("init(bars_0, 1)", 22),
        ("init(bars_4, 2)", 26),
        ("syncthreads", 29),
        ("arrive_expect_tx(bars_0, 128)", 34),
        ("copy_async(tile[0], bars_0)", 35),
        ("wait_parity(bars_0, 0)", 37),
        ("expect_tx(bars_1, 16)", 39),
        ("complete_tx(bars_1, 16)", 40),
        ("let tok1 = arrive(bars_1)", 41),
        ("wait(bars_1, tok1)", 43),
        ("cp_async(tile[1], offset = 0, bytes = 16)", 46),
        ("cp_async_arrive(bars_2)", 47),
        ("arrive(bars_2)", 48),
        ("cp_async(tile[1], offset = 16, bytes = 16)", 50),
        ("cp_async_arrive_noinc(bars_3)", 51),
        ("wait_parity(bars_3, 0)", 52),
        ("write(res, 0, offset = 0, bytes = 4)", 54),
        ("copy_store_async(res)", 56),
        ("copy_store_async(res)", 57),
        ("commit_group()", 58),
        ("wait_group_read(0)", 59),
        ("wait_group(0)", 60),
        ("expect_tx(bars_5, 8)", 62),
        ("let tok3 = arrive(bars_5)", 62),
        ("wait(bars_5, tok3)", 63),
        ("bar_sync(1, 32)", 64),
        ("arrive_and_drop(bars_4)", 65),
        ("inval(bars_4)", 66),
    ] {
        statement_from(&spec, stmt, "more_forms.ptx", line);
    }
    // the tensor copy's bytes came from --tma-bytes (exact); a single try_wait is assumed to
    // succeed, and a fence between generic accesses is dropped, both said so
    assert!(stderr.contains("copy_async, 128 bytes from --tma-bytes"), "{stderr}");
    assert!(
        stderr.contains("assumed     more_forms.ptx:52") && stderr.contains("outside a loop"),
        "{stderr}"
    );
    assert!(stderr.contains("assumed     more_forms.ptx:61"), "{stderr}");
    assert!(
        stderr.contains("more_forms.ptx:57") && stderr.contains("cp.async.bulk.tensor (bulk_group store)"),
        "{stderr}"
    );
    assert!(stderr.contains(" 0 unresolved"), "{stderr}");
    phasecheck_verifier::api::parse_spec("more_forms", &spec, &[]).unwrap();
}

#[test]
fn without_its_bytes_a_tensor_copy_is_assumed_to_bring_the_expected_tx() {
    let (spec, stderr, code) = import("more_forms.ptx", &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(spec.contains("copy_async(tile[0], bars_0)"), "{spec}");
    assert!(
        stderr.contains("assumed     more_forms.ptx:35") && stderr.contains("pass --tma-bytes more_forms_param_1=B"),
        "{stderr}"
    );
}

#[test]
fn every_unmapped_barrier_form_is_unresolved_at_its_line() {
    let (spec, stderr, code) = import("unmapped_forms.ptx", &[]);
    assert_eq!(code, 3, "{stderr}");
    for (line, what) in [
        (22, "noComplete"),
        (23, "peer CTA"),
        (24, "leaves out CTA 0"),
        (26, "descriptor"),
        (27, "could not follow"),
        (29, "cp.async.wait_group"),
        (30, "CTA rank"),
        (31, "tcgen05"),
        (32, "call"),
        (33, "without a shared-memory operand"),
        (34, "barrier.cluster.sync"),
        (35, "hold barriers too"),
    ] {
        let l = stderr
            .lines()
            .find(|l| l.starts_with(&format!("  unresolved  unmapped_forms.ptx:{line} ")))
            .unwrap_or_else(|| panic!("line {line} ({what}) is not unresolved:\n{stderr}"));
        assert!(l.contains(what), "{l}");
    }
    // what was mapped is still there
    assert!(spec.contains("init(bar, 1)") && spec.contains("arrive(bar)"), "{spec}");
}

#[test]
fn cluster_wgmma_and_cp_async_group_forms_become_their_statements() {
    let (spec, stderr, code) = import("cluster_forms.ptx", &["--tma-bytes", "1=256"]);
    assert_eq!(code, 0, "{stderr}");
    for (stmt, line) in [
        // an arrive and the wait right after it: the block's barrier in a one-CTA cluster
        ("syncthreads", 26),
        // through mapa of rank 0: the CTA's own barrier
        ("arrive_expect_tx(bars[0], 256)", 32),
        // a multicast to CTA 0 alone
        ("copy_async(tile[0], bars[0])", 36),
        ("copy_async(tile[1], bars[1])", 39),
        // the descriptors' start addresses (bits 0..14, in 16-byte units) name both stages
        ("wgmma_async(tile[0], tile[1])", 53),
        ("wgmma_wait(0)", 54),
        ("cp_async(stage)", 56),
        ("cp_async_commit_group()", 57),
        ("cp_async_wait_group(1)", 58),
        ("cp_async_wait_all()", 59),
        // split by an arrival: the cluster barrier's two halves
        ("cluster_arrive()", 60),
        ("arrive(bars[1])", 61),
        ("cluster_wait()", 62),
    ] {
        statement_from(&spec, stmt, "cluster_forms.ptx", line);
    }
    for (line, what) in [
        (26, "barrier.cluster.arrive.relaxed -> cluster_arrive"),
        (31, "mapa of rank 0"),
        (36, "multicast mask 0x1"),
        (46, "on a shared address -> a number"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&format!("  assumed     cluster_forms.ptx:{line} ")) && l.contains(what)),
            "line {line} is not assumed ({what}):\n{stderr}"
        );
    }
    assert!(stderr.contains("wgmma.fence: no statement of its own"), "{stderr}");
    assert!(stderr.contains(" 0 unresolved"), "{stderr}");
    phasecheck_verifier::api::parse_spec("cluster_forms", &spec, &[]).unwrap();
}

#[test]
fn a_warp_index_broadcast_by_shfl_decides_the_roles() {
    let (spec, stderr, code) = import("shfl_roles.ptx", &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(spec.contains("role warp0 warps 1 uniform {"), "{spec}");
    assert!(spec.contains("role warp1 warps 1 uniform {\n  syncthreads"), "{spec}");
    statement_from(&spec, "arrive(bar)", "shfl_roles.ptx", 26);
    statement_from(&spec, "wait_parity(bar, 0)", "shfl_roles.ptx", 29);
    assert!(!spec.contains("warp1 warps 1 uniform {\n  syncthreads\n  arrive"), "{spec}");
    assert!(
        stderr.contains("assumed     shfl_roles.ptx:16") && stderr.contains("the lanes are converged"),
        "{stderr}"
    );
    // an even lane reads lane + 1, which has not run yet: unknown, and dropped as data
    assert!(stderr.contains("shfl (value unknown) 1"), "{stderr}");
}

#[test]
fn a_warp_collective_store_and_a_carved_symbol_become_an_elected_write_and_a_buffer() {
    let (spec, stderr, code) = import("epilogue_forms.ptx", &["--tma-bytes", "0=512"]);
    assert_eq!(code, 0, "{stderr}");
    // the barrier and the tile share one dynamic symbol: a barrier and a buffer apart
    assert!(spec.contains("barrier smem count 1 manual_init"), "{spec}");
    assert!(spec.contains("buffer smem_data bytes 512"), "{spec}");
    // the 32 lanes' stmatrix rows (16 bytes each) are one write, by one lane for the warp
    assert!(
        spec.contains(
            "  let e2 = elect()                                     // from epilogue_forms.ptx:30\n  if e2 == 1 {\n    write(smem_data, 0)"
        ),
        "{spec}"
    );
    statement_from(&spec, "copy_store_async(smem_data)", "epilogue_forms.ptx", 40);
    statement_from(&spec, "arrive(smem)", "epilogue_forms.ptx", 43);
    for what in [
        "a warp-collective store -> a write in an elect() block",
        "a buffer apart from its barriers",
    ] {
        assert!(stderr.contains(what), "{what}:\n{stderr}");
    }
    // fenced, ordered by the named barrier, read back before the CTA exits: it holds
    let path = std::env::temp_dir().join(format!("epilogue_forms_{}.phase", std::process::id()));
    std::fs::write(&path, &spec).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("verdict: holds"), "{text}");
}

#[test]
fn a_grid_sync_is_two_syncthreads_under_stated_assumptions() {
    let (spec, stderr, code) = import("grid_sync.ptx", &["--entry", "grid_sync"]);
    assert_eq!(code, 0, "{stderr}");
    // the workspace check does not trap, thread 0's spin ends: every thread meets both bar.syncs
    // and the barrier it waits on
    for role in ["role warp0 warps 1 uniform {", "role warp1 warps 1 uniform {"] {
        let body = spec.split(role).nth(1).unwrap_or_else(|| panic!("no `{role}` in\n{spec}"));
        let body = body.split("\n}").next().unwrap();
        assert_eq!(body.matches("syncthreads").count(), 2, "{role}\n{spec}");
        assert!(body.contains("wait(bar, tok"), "{role}\n{spec}");
    }
    for (line, what) in [(14, "one way to `trap`"), (15, "a loop that only polls global memory")] {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&format!("  assumed     kernel.cu:{line} ")) && l.contains(what)),
            "kernel.cu:{line} is not assumed ({what}):\n{stderr}"
        );
    }
    // helper.h:5 was inlined into helper.h:30, itself inlined into kernel.cu:12: the kernel's line
    assert!(
        spec.lines()
            .any(|l| l.trim_start().starts_with("init(bar, 64)") && l.ends_with("// from kernel.cu:12 (inlined from helper.h:5)")),
        "{spec}"
    );
    statement_from(&spec, "syncthreads", "kernel.cu", 16);
    assert!(stderr.contains(" 0 unresolved"), "{stderr}");
}

#[test]
fn a_spin_that_may_touch_shared_memory_stays_unresolved() {
    // one that also writes shared memory, one whose generic load has no scope
    for entry in ["not_a_spin", "generic_spin"] {
        let (_, stderr, code) = import("grid_sync.ptx", &["--entry", entry]);
        assert_eq!(code, 3, "{entry}: {stderr}");
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with("  unresolved  grid_sync.ptx:") && l.contains("guard @%p2 of `bra`")),
            "{entry}: {stderr}"
        );
    }
}

#[test]
fn a_field_of_a_struct_param_is_set_by_its_offset() {
    // the loop bound is the u32 at byte 8 of the struct param, the barrier count at byte 12
    let (spec, stderr, code) = import("param_fields.ptx", &["--param", "0+8=3", "--param", "param_fields_param_0+12=2"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(spec.contains("init(bar, 2)"), "{spec}");
    assert!(spec.contains("for r in 0..3 {\n      arrive(bar)"), "{spec}");
    // `[%r11+-4]`, 8 bytes into `data` less 4
    assert!(spec.contains("read(data, offset = 4, bytes = 4)"), "{spec}");
    // the whole param's value is not its fields': given as `0=3`, the fields stay unknown
    let (_, stderr, code) = import("param_fields.ptx", &["--param", "0=3"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("  unresolved  param_fields.ptx:") && l.contains("init count")),
        "{stderr}"
    );
}

#[test]
fn an_entry_without_a_protocol_says_so() {
    let (spec, stderr, code) = import("no_protocol.ptx", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(spec.is_empty(), "{spec}");
    assert!(
        stderr.contains("no_protocol.ptx: error: `no_protocol` has no barrier operation")
            && stderr.contains("there is no protocol to import"),
        "{stderr}"
    );
    assert!(!stderr.contains("please report") && !stderr.contains("panicked"), "{stderr}");
}
