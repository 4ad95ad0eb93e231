//! `phasecheck import` on our own kernels (import/kernels/): each is compiled with NVRTC for
//! sm_90a, imported, and checked. The correct ones hold; each planted-bug twin is found with
//! the right violation kind, its trace runs the statement the bug planted, and that
//! statement's `// from` comment names the planted source line.
//!
//! Without NVRTC (`source gpu-conformance/ci/setup-nvrtc.sh`) these tests print why and pass,
//! unless `CI` is set, where a missing NVRTC fails them.

use phasecheck_verifier::api::{check, check_with, parse_spec, CheckOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

fn kernels() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("import/kernels")
}

fn nvrtc_or_skip(test: &str) -> bool {
    if phasecheck_gpu::nvrtc::available() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test}: NVRTC is not available and CI is set (source gpu-conformance/ci/setup-nvrtc.sh)");
    }
    eprintln!("{test}: skipped: NVRTC is not available (source gpu-conformance/ci/setup-nvrtc.sh)");
    false
}

/// Import KERNEL.cu with the flags; the spec text and the import's exit status.
fn import(kernel: &str, flags: &[&str]) -> (String, i32, String) {
    let out = std::env::temp_dir().join(format!(
        "phasecheck-import-{kernel}-{}-{}.phase",
        flags.join("_").replace(['-', '='], ""),
        std::process::id()
    ));
    let r = Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .arg("import")
        .arg(kernels().join(format!("{kernel}.cu")))
        .args(["--tma-bytes", "0=256", "--tma-bytes", "1=128", "-o"])
        .arg(&out)
        .arg("--")
        .args(flags)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    let spec = std::fs::read_to_string(&out).unwrap_or_else(|_| panic!("import of {kernel} {flags:?} wrote nothing:\n{stderr}"));
    let _ = std::fs::remove_file(&out);
    (spec, r.status.code().unwrap_or(-1), stderr)
}

/// The line of KERNEL.cu holding `text`, the first after `after` when given.
fn line_of(kernel: &str, after: Option<&str>, text: &str) -> usize {
    let src = std::fs::read_to_string(kernels().join(format!("{kernel}.cu"))).unwrap();
    let start = after.map_or(0, |a| src.lines().position(|l| l.contains(a)).expect("marker"));
    start
        + 1
        + src
            .lines()
            .skip(start)
            .position(|l| l.contains(text))
            .unwrap_or_else(|| panic!("`{text}` not in {kernel}.cu"))
}

/// The root-cause lines `phasecheck check` prints for a spec.
fn root_causes(kernel: &str, spec: &str) -> String {
    let path = std::env::temp_dir().join(format!("phasecheck-import-check-{kernel}-{}.phase", std::process::id()));
    std::fs::write(&path, spec).unwrap();
    let r = Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    String::from_utf8_lossy(&r.stdout)
        .lines()
        .filter(|l| l.starts_with("root cause"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn holds(kernel: &str) {
    holds_with(kernel, &[])
}

fn holds_with(kernel: &str, flags: &[&str]) {
    if !nvrtc_or_skip(kernel) {
        return;
    }
    let (spec, code, stderr) = import(kernel, flags);
    assert_eq!(code, 0, "import of {kernel} left something unresolved:\n{stderr}");
    let loaded = parse_spec(kernel, &spec, &[]).unwrap();
    let c = check(&loaded);
    assert!(c.holds(), "{kernel}: {}\n{spec}", c.summary());
}

/// A twin: the kind found, and the planted statement (its start: rounds folded into a loop
/// name their stage as `r % 2`) in its trace, from the planted line, holding `value`.
fn found(kernel: &str, flag: &str, kind: &str, statement: &str, value: &str, source_line: usize) {
    found_with(kernel, &[flag], kind, statement, value, source_line)
}

/// [`found`] with the twin's flag among others (the last of `flags` is the planting one).
fn found_with(kernel: &str, flags: &[&str], kind: &str, statement: &str, value: &str, source_line: usize) {
    let flag = flags.last().copied().unwrap_or("");
    if !nvrtc_or_skip(kernel) {
        return;
    }
    let (spec, code, stderr) = import(kernel, flags);
    assert_eq!(code, 0, "import of {kernel} {flag}:\n{stderr}");
    let loaded = parse_spec(kernel, &spec, &[]).unwrap();
    // as `phasecheck check` does: states past a violation get a bounded allowance
    let c = check_with(
        &loaded,
        &CheckOptions {
            past_violation_factor: Some(10.0),
            ..CheckOptions::default()
        },
    );
    let i = c
        .violations()
        .iter()
        .position(|v| v.kind.name() == kind)
        .unwrap_or_else(|| panic!("{kernel} {flag}: no {kind}: {}\n{spec}", c.summary()));
    // The planted statement runs in the trace, or (a deadlock) is where a thread is blocked,
    // which the checker's root cause names.
    let trace = c.trace_text(&loaded, i);
    let causes = if trace.contains(statement) {
        String::new()
    } else {
        root_causes(kernel, &spec)
    };
    assert!(
        trace.contains(statement) || causes.lines().any(|l| l.contains(kind) && l.contains(statement)),
        "{kernel} {flag}: neither the {kind} trace nor a root cause names `{statement}`:\n{trace}\n{causes}"
    );
    let from = format!("// from {kernel}.cu:{source_line}");
    let lines: Vec<&str> = spec.lines().filter(|l| l.trim_start().starts_with(statement)).collect();
    assert!(!lines.is_empty(), "{kernel} {flag}: the spec has no `{statement}`:\n{spec}");
    assert!(
        lines.iter().all(|l| l.contains(&from)),
        "{kernel} {flag}: `{statement}` is not {from}:\n{}",
        lines.join("\n")
    );
    assert!(
        lines.iter().any(|l| l.contains(value)),
        "{kernel} {flag}: no `{statement}` holds `{value}`:\n{}",
        lines.join("\n")
    );
}

#[test]
fn tma_ring_holds() {
    holds("tma_ring");
}

#[test]
fn tma_ring_wrong_expect_tx_bytes() {
    let line = line_of("tma_ring", Some("#ifdef PLANT_WRONG_TX"), "SLOT_BYTES / 2");
    found("tma_ring", "-DPLANT_WRONG_TX", "deadlock", "arrive_expect_tx(full[", ", 128)", line);
}

#[test]
fn double_buffer_holds() {
    holds("double_buffer");
}

#[test]
fn double_buffer_wrong_init_count() {
    let line = line_of("double_buffer", Some("#ifdef PLANT_WRONG_COUNT"), "mbar_init(&empty[s], 32)");
    found("double_buffer", "-DPLANT_WRONG_COUNT", "deadlock", "init(empty[", ", 32)", line);
}

#[test]
fn fa3_pipeline_holds() {
    holds("fa3_pipeline");
}

#[test]
fn fa3_pipeline_early_release() {
    let line = line_of("fa3_pipeline", Some("#ifdef PLANT_EARLY_RELEASE"), "mbar_arrive(&empty[s])");
    found("fa3_pipeline", "-DPLANT_EARLY_RELEASE", "data-race", "arrive(empty[", "", line);
}

#[test]
fn deepgemm_tma_holds() {
    holds("deepgemm_tma");
}

#[test]
fn deepgemm_tma_wrong_start_parity() {
    let line = line_of("deepgemm_tma", None, "mbar_wait_parity(&empty[s], phase)");
    found("deepgemm_tma", "-DPLANT_START_PARITY", "deadlock", "wait_parity(empty[", "", line);
}

#[test]
fn deepgemm_tma_missing_init_fence() {
    // the init the fence should have covered is the one the cause is about
    let line = line_of("deepgemm_tma", None, "mbar_init(&full[s], 1)");
    found("deepgemm_tma", "-DPLANT_NO_INIT_FENCE", "uninitialized", "init(full[", ", 1)", line);
}

#[test]
fn the_missing_fence_is_not_in_the_imported_spec() {
    if !nvrtc_or_skip("deepgemm_tma") {
        return;
    }
    let (with, _, _) = import("deepgemm_tma", &[]);
    let (without, _, _) = import("deepgemm_tma", &["-DPLANT_NO_INIT_FENCE"]);
    assert!(with.contains("fence_mbarrier_init()"));
    assert!(!without.contains("fence_mbarrier_init()"));
}

#[test]
fn pingpong_gemm_holds() {
    holds("pingpong_gemm");
}

#[test]
fn pingpong_gemm_wrong_start_parity() {
    let line = line_of("pingpong_gemm", Some("#ifdef PLANT_START_PARITY"), "mbar_wait_parity(&full[s]");
    found(
        "pingpong_gemm",
        "-DPLANT_START_PARITY",
        "data-race",
        "wait_parity(full[",
        ", 1)",
        line,
    );
}

/// One stage reused over two rounds: with two stages and three rounds the per-thread copies'
/// interleavings are more than a CI run explores (docs/import.md gives the numbers).
const CP_ASYNC_SMALL: [&str; 2] = ["-DSTAGES=1", "-DITERS=2"];

#[test]
fn cp_async_multistage_holds() {
    holds_with("cp_async_multistage", &CP_ASYNC_SMALL);
}

#[test]
fn cp_async_multistage_wrong_init_count() {
    let line = line_of(
        "cp_async_multistage",
        Some("#ifdef PLANT_WRONG_COUNT"),
        "mbar_init(&full[s], THREADS / 2)",
    );
    let flags = [CP_ASYNC_SMALL[0], CP_ASYNC_SMALL[1], "-DPLANT_WRONG_COUNT"];
    found_with("cp_async_multistage", &flags, "data-race", "init(full", ", 1)", line);
}

#[test]
fn early_exit_drop_holds() {
    holds("early_exit_drop");
}

#[test]
fn early_exit_drop_early_release() {
    let line = line_of("early_exit_drop", Some("#ifdef PLANT_EARLY_RELEASE"), "mbar_arrive_drop(&empty[s])");
    found(
        "early_exit_drop",
        "-DPLANT_EARLY_RELEASE",
        "deadlock",
        "arrive_and_drop(empty[",
        "",
        line,
    );
}

#[test]
fn tma_store_epilogue_holds() {
    holds("tma_store_epilogue");
}

#[test]
fn tma_store_epilogue_wrong_expect_tx_bytes() {
    let line = line_of(
        "tma_store_epilogue",
        Some("#ifdef PLANT_WRONG_TX"),
        "mbar_expect_tx(&full[s], A_BYTES)",
    );
    found(
        "tma_store_epilogue",
        "-DPLANT_WRONG_TX",
        "deadlock",
        "expect_tx(full[",
        ", 128)",
        line,
    );
}

/// The round trip's last leg: `check` on an imported twin names the kernel's line in its trace
/// and its root cause, and the HTML report shows the kernel's source line beside every step.
#[test]
fn check_of_an_imported_twin_cites_the_kernel_line_in_trace_cause_and_html() {
    if !nvrtc_or_skip("tma_ring") {
        return;
    }
    let line = line_of("tma_ring", Some("#ifdef PLANT_WRONG_TX"), "SLOT_BYTES / 2");
    let from = format!("tma_ring.cu:{line}");
    let (spec, code, stderr) = import("tma_ring", &["-DPLANT_WRONG_TX"]);
    assert_eq!(code, 0, "{stderr}");
    let dir = std::env::temp_dir();
    let path = dir.join(format!("phasecheck-import-html-{}.phase", std::process::id()));
    let html = dir.join(format!("phasecheck-import-html-{}.html", std::process::id()));
    std::fs::write(&path, &spec).unwrap();
    let r = Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .arg("check")
        .arg(&path)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&r.stdout).into_owned();
    let page = std::fs::read_to_string(&html).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&html);
    assert_eq!(r.status.code(), Some(1), "{out}");
    // the trace: the planted statement's step, with its kernel line
    assert!(
        out.lines()
            .any(|l| l.contains("| arrive_expect_tx(full[") && l.contains(&format!("// from {from} "))),
        "no trace step from {from}:\n{out}"
    );
    // the root cause of the tx mismatch names the planted kernel line
    let lines: Vec<&str> = out.lines().collect();
    let k = lines
        .iter()
        .position(|l| l.starts_with("root cause") && l.contains("tx mismatch"))
        .unwrap_or_else(|| panic!("no tx-mismatch root cause:\n{out}"));
    assert!(
        lines.get(k + 1).is_some_and(|l| l.starts_with(&format!("  from: {from} "))),
        "the root cause does not cite {from}:\n{out}"
    );
    // the HTML: a kernel-source column, filled on every step row, the planted step among them
    assert!(page.contains("<th>kernel source</th>"), "{page}");
    let rows: Vec<&str> = page.lines().filter(|l| l.starts_with("<tr id=\"t")).collect();
    let steps: Vec<&&str> = rows.iter().filter(|l| !l.contains("-end\"")).collect();
    assert!(!steps.is_empty(), "{page}");
    for row in &steps {
        assert!(
            row.contains("<td class=\"mono cited\">tma_ring.cu:"),
            "a step without its kernel line: {row}"
        );
    }
    assert!(
        steps
            .iter()
            .any(|r| r.contains("arrive_expect_tx(full[") && r.contains(&format!("<td class=\"mono cited\">{from} "))),
        "no step row cites {from}"
    );
    assert!(
        page.contains(&format!("<span class=\"cited\">from {from} ")),
        "the root cause block does not cite {from}"
    );
}
