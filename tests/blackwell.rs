//! The Blackwell statements (docs/language.md, "Blackwell"): what the user sees of them beyond the
//! library's verdicts (specs/blackwell/, checked by `phasecheck test specs/` and the library
//! golden): misuse of tensor memory is an input error with a position, every engine that cannot
//! run them says so by the statement's name, and the report header names the statement that turns
//! the partial-order reduction off.

mod common;
use common::{code, phasecheck, text};
use std::path::PathBuf;

/// A spec written to a file of its own (removed when the guard drops).
struct SpecFile(PathBuf);

impl SpecFile {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for SpecFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn spec_file(name: &str, body: &str) -> SpecFile {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("phasecheck-blackwell-{}-{name}-{n}.phase", std::process::id()));
    std::fs::write(&p, body).unwrap();
    SpecFile(p)
}

/// A shared-memory statement on a tensor-memory region, and a response buffer of the wrong size:
/// E118 at the statement, with a caret and exit 2.
#[test]
fn tensor_memory_misuse_is_an_input_error_at_its_statement() {
    let cases = [
        (
            "protocol t\nbuffer acc bytes 64\nrole w[1] {\n  tmem_alloc(acc, 32)\n  write(acc, 1)\n  tmem_dealloc(acc)\n}\n",
            ":5:3",
            "`acc` is tensor memory",
        ),
        (
            "protocol t\nbarrier b count 1\nbuffer a bytes 64\nbuffer acc bytes 64\nrole w[1] {\n  tmem_alloc(acc, 32)\n  tcgen05_mma(a, acc)\n}\n",
            ":7:3",
            "`acc` is tensor memory",
        ),
        (
            "protocol t\nbarrier b count 1\nbuffer r bytes 32\nrole w[1] {\n  arrive_expect_tx(b, 16)\n  clc_try_cancel(r, b)\n}\n",
            ":6:3",
            "16-byte response",
        ),
    ];
    for (src, at, says) in cases {
        let f = spec_file("e118", src);
        let o = phasecheck(&["check", f.path().to_str().unwrap()]);
        let err = text(&o.stderr);
        assert_eq!(code(&o), 2, "{src}\n{err}");
        assert!(err.contains("error[E118]"), "{err}");
        assert!(err.contains(at), "{at} in {err}");
        assert!(err.contains('^'), "{err}");
        assert!(err.contains(says), "{err}");
    }
}

/// The GPU stage cannot emit them (`not expressible on sm_90`), the reference runtime and `prove`
/// refuse them by name; `check` gives the verdict.
#[test]
fn engines_that_cannot_run_blackwell_statements_name_them() {
    let spec = "specs/blackwell/tcgen05_release_before_commit.phase";
    let o = phasecheck(&["emit-cuda", spec]);
    let all = text(&o.stdout) + &text(&o.stderr);
    assert!(all.contains("tmem_alloc is not expressible on sm_90"), "{all}");
    assert!(all.contains("line 23"), "{all}");

    let clc = "specs/blackwell/clc_response_read_before_wait.phase";
    let o = phasecheck(&["emit-cuda", clc]);
    let all = text(&o.stdout) + &text(&o.stderr);
    assert!(all.contains("clc_try_cancel is not expressible on sm_90"), "{all}");

    let o = phasecheck(&["run", "--cpu", spec]);
    assert_eq!(code(&o), 2);
    let err = text(&o.stderr);
    assert!(err.contains("does not model Blackwell's `tmem_alloc`"), "{err}");

    let o = phasecheck(&["prove", clc]);
    assert_eq!(code(&o), 3, "prove of a Blackwell spec is unknown");
    let out = text(&o.stdout);
    assert!(out.contains("`clc_try_cancel` is modelled only by the explicit search"), "{out}");

    let o = phasecheck(&["check", spec]);
    assert_eq!(code(&o), 1);
    assert!(text(&o.stdout).contains("verdict: violated (data-race)"));
}

/// The forms a commit tracks: releasing a stage with a commit issued before the MMA that reads it
/// is a race (it tracks only earlier MMAs), after it holds; the same for the accumulator's load.
#[test]
fn a_commit_tracks_only_the_mmas_issued_before_it() {
    let body = |release_first: bool| {
        let (a, b) = (
            "  tcgen05_mma(acc, a_tile, expect = i)\n",
            "  if i == 0 { tcgen05_commit(empty) }\n",
        );
        let (x, y) = if release_first { (b, a) } else { (a, b) };
        format!(
            "protocol c\nbarrier full count 1\nbarrier empty count 1\nbarrier acc_full count 1\nbuffer a_tile bytes 64\nbuffer acc bytes 64\nrole p[1] {{\n for i in 0..2 {{\n  if i > 0 {{ wait_parity(empty, 0) }}\n  arrive_expect_tx(full, 64)\n  copy_async(a_tile, full, version = i)\n }}\n}}\nrole m[1] {{\n tmem_alloc(acc, 32)\n for i in 0..2 {{\n  wait_parity(full, i % 2)\n{x}{y} }}\n tcgen05_commit(acc_full)\n wait_parity(acc_full, 0)\n tcgen05_ld(acc)\n tcgen05_wait_ld()\n tmem_dealloc(acc)\n}}\n"
        )
    };
    let good = spec_file("after", &body(false));
    let o = phasecheck(&["check", good.path().to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    let bad = spec_file("before", &body(true));
    let o = phasecheck(&["check", bad.path().to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    let out = text(&o.stdout);
    // The commit issued before the MMA arrives at once (no MMA of its thread runs yet): the
    // producer refills the stage before the MMA has even read it.
    assert!(out.contains("verdict: violated (data-race"), "{out}");
    assert!(
        out.contains("m#0 issues tcgen05_mma reading a_tile before the async copy into it has landed"),
        "{out}"
    );
}

/// A spec that no backend can generate is refused per backend before the model stages: the
/// report says why (`not expressible on sm_90`), not that an outcome budget it never needed ran
/// out (the Blackwell GEMM was `not run (budget)` on the H200 run of 2026-12-02).
#[test]
fn the_gpu_stage_refuses_a_blackwell_spec_before_enumerating_its_outcomes() {
    let out = std::env::temp_dir().join(format!("phasecheck-blackwell-plan-{}.json", std::process::id()));
    let o = phasecheck(&[
        "gpu",
        "run",
        "specs/blackwell/cutlass_sm100_gemm_commit_before_mma.phase",
        "--plan-only",
        "--outcome-limit",
        "10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for c in cases {
        let why = c["why"].as_str().unwrap();
        assert!(
            why.starts_with("not expressible: ") && why.contains("is not expressible on sm_90"),
            "{why}"
        );
        assert!(!why.contains("not expressible: not expressible"), "{why}");
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(out.with_extension("md"));
}
