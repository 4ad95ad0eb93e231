//! TMA descriptors in shared memory (`tensormap`): what the `specs/hopper/tensormap_*` expect
//! lines cannot say. Which fence covers an edit, from which thread, the descriptor version a
//! copy means, the read that lasts until the landing, and the front end's refusals.

mod common;
use common::{code, phasecheck, text};

/// `phasecheck check` of `source` written to a fresh file: (exit status, stdout + stderr).
fn check(name: &str, source: &str) -> (i32, String) {
    common::check_source("tensormap", name, source)
}

/// An editor thread and a producer that copies through the descriptor; EDIT and PROD are the
/// bodies under test (`ready` orders the editor before the producer when they use it).
fn spec(edit: &str, prod: &str) -> String {
    format!(
        "protocol p\nbarrier full count 1\nbarrier ready count 1\nbuffer tile bytes 64\ntensormap desc\nrole editor[1] {{\n{edit}\n}}\nrole producer[1] {{\n{prod}\n}}\n"
    )
}

fn verdict(name: &str, edit: &str, prod: &str) -> String {
    let (c, out) = check(name, &spec(edit, prod));
    assert!(c == 0 || c == 1, "{name}: {out}");
    out.lines().find(|l| l.starts_with("verdict:")).unwrap_or_default().to_string()
}

const COPY: &str = "  arrive_expect_tx(full, 64)\n  copy_async(tile, full, tensormap = desc, expect = 1)\n  wait_parity(full, 0)";

#[test]
fn only_the_tensormap_fence_makes_an_edit_visible_to_the_copy() {
    let own = |fence: &str| verdict("own", "  work", &format!("  tensormap_write(desc, 1)\n  {fence}\n{COPY}"));
    assert_eq!(own("fence_proxy_tensormap(desc)"), "verdict: holds");
    assert_eq!(own("fence_proxy_async()"), "verdict: violated (data-race)");
    assert_eq!(own("work"), "verdict: violated (data-race)");
}

#[test]
fn the_fence_may_be_run_by_the_editor_or_by_the_issuer_after_acquiring_the_edit() {
    let issuer_waits = format!("  wait_parity(ready, 0)\n{COPY}");
    assert_eq!(
        verdict(
            "editor_fences",
            "  tensormap_write(desc, 1)\n  fence_proxy_tensormap(desc)\n  arrive(ready)",
            &issuer_waits
        ),
        "verdict: holds"
    );
    assert_eq!(
        verdict(
            "issuer_fences",
            "  tensormap_write(desc, 1)\n  arrive(ready)",
            &format!("  wait_parity(ready, 0)\n  fence_proxy_tensormap(desc)\n{COPY}")
        ),
        "verdict: holds"
    );
    // Fenced by the editor but not ordered before the copy: the edit races with the copy's
    // read of the descriptor, or has not happened yet (the copy then uses version 0).
    assert_eq!(
        verdict(
            "unordered",
            "  tensormap_write(desc, 1)\n  fence_proxy_tensormap(desc)\n  arrive(ready)",
            &format!("{COPY}\n  wait_parity(ready, 0)")
        ),
        "verdict: violated (data-race, stale-read)"
    );
}

#[test]
fn a_fenced_descriptor_of_another_version_is_a_stale_read() {
    let (c, out) = check(
        "stale",
        &spec(
            "  work",
            "  tensormap_write(desc, 1)\n  fence_proxy_tensormap(desc)\n  arrive_expect_tx(full, 64)\n  copy_async(tile, full, tensormap = desc, expect = 2)\n  wait_parity(full, 0)",
        ),
    );
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("verdict: violated (stale-read)"), "{out}");
    assert!(out.contains("holding version 1, but the protocol means version 2"), "{out}");
}

#[test]
fn the_descriptor_may_be_edited_again_only_after_the_landing() {
    let body = |tail: &str| {
        format!("  tensormap_write(desc, 1)\n  fence_proxy_tensormap(desc)\n  arrive_expect_tx(full, 32)\n  copy_async(tile, full, offset = 0, bytes = 32, tensormap = desc, expect = 1)\n{tail}")
    };
    assert_eq!(
        verdict("after", "  work", &body("  wait_parity(full, 0)\n  tensormap_write(desc, 2)")),
        "verdict: holds"
    );
    let (c, out) = check(
        "before",
        &spec("  work", &body("  tensormap_write(desc, 2)\n  wait_parity(full, 0)")),
    );
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("verdict: violated (data-race)"), "{out}");
    assert!(out.contains("edits descriptor desc while a tensor copy issued with it"), "{out}");
    // Leaving with the copy in flight: the CTA's shared memory (the descriptor's too) goes.
    let (c, out) = check("exit", &spec("  work", &body("  work")));
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("verdict: violated (lifetime)"), "{out}");
}

#[test]
fn descriptors_and_buffers_are_not_interchangeable() {
    for (name, prod, code_, says) in [
        (
            "write_desc",
            "  write(desc, 1)",
            "E023",
            "`desc` is a tensormap (a TMA descriptor), but `write` needs a buffer",
        ),
        (
            "edit_tile",
            "  tensormap_write(tile, 1)",
            "E023",
            "`tile` is a buffer, but `tensormap_write` needs a tensormap",
        ),
        (
            "copy_map_tile",
            "  copy_async(tile, full, tensormap = tile)",
            "E023",
            "needs a tensormap",
        ),
        ("typo", "  fence_proxy_tensormap(dsc)", "E021", "did you mean `desc`?"),
        (
            "remote",
            "  copy_async(tile, full, tensormap = desc, cta = 0)",
            "E007",
            "copy into the issuing CTA only",
        ),
        (
            "expect_alone",
            "  copy_async(tile, full, expect = 1)",
            "E007",
            "it needs `tensormap = MAP`",
        ),
        (
            "twice",
            "  copy_async(tile, full, tensormap = desc, tensormap = desc)",
            "E007",
            "given twice",
        ),
    ] {
        let (c, out) = check(name, &spec("  work", prod));
        assert_eq!(c, 2, "{name}: {out}");
        assert!(out.contains(code_) && out.contains(says), "{name}: {out}");
        assert!(
            out.contains(".phase:10:"),
            "{name}: the diagnostic points at the statement's line: {out}"
        );
        assert!(out.contains('^'), "{name}: a caret under the culprit: {out}");
    }
}

#[test]
fn the_reference_runtime_refuses_a_tensor_copy_by_name() {
    let dir = std::env::temp_dir().join(format!("phasecheck-tensormap-run-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("gpu.phase");
    std::fs::write(
        &f,
        spec(
            "  work",
            &format!("  tensormap_write(desc, 1)\n  fence_proxy_tensormap(desc)\n{COPY}"),
        ),
    )
    .unwrap();
    let o = phasecheck(&["run", f.to_str().unwrap(), "--cpu", "--runs", "5"]);
    let out = format!("{}{}", text(&o.stdout), text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(code(&o), 0, "{out}");
    assert!(out.contains("does not model TMA descriptors in shared memory"), "{out}");
}
