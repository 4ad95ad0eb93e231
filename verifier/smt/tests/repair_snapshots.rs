//! `repair` on five counting bugs of the library: a parity that starts on the wrong phase, a
//! byte count that announces more than the copy moves, bytes outstanding beyond the tx-count
//! range, a count that drops to zero, and a count for the whole block when one warp arrives. Each
//! repair was proved by Z3 over the counting laws and accepted by the explicit search (`repair`
//! keeps nothing else); the snapshot pins the ranked diffs.

use phasecheck_model::spec::load;
use phasecheck_smt::repair::repair;
use std::path::PathBuf;

fn spec(rel: &str) -> phasecheck_model::spec::Spec {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut s = load(&root.join(rel), &[]).expect("library spec loads");
    s.display = rel.to_string();
    s
}

fn repaired(rel: &str) -> String {
    let s = spec(rel);
    let fixes = repair(&s, &[]).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert!(!fixes.is_empty(), "{rel}: no repair found");
    let mut out = String::new();
    for (i, f) in fixes.iter().take(3).enumerate() {
        assert!(f.clean);
        out.push_str(&format!("repair {}: {}\n{}", i + 1, f.summary, f.diff));
    }
    out
}

#[test]
fn producer_start_phase() {
    insta::assert_snapshot!(repaired("specs/field/fa_1317_barrier_O_parity_starts_at_0.phase"));
}

#[test]
fn tx_undercount_by_the_copy() {
    insta::assert_snapshot!(repaired("specs/kinds/deadlock.phase"));
}

#[test]
fn tx_beyond_range() {
    insta::assert_snapshot!(repaired("specs/kinds/tx_range.phase"));
}

#[test]
fn count_of_zero() {
    insta::assert_snapshot!(repaired("specs/kinds/count_range_init.phase"));
}

#[test]
fn count_for_block_one_warp_arrives() {
    insta::assert_snapshot!(repaired("specs/mistakes/count_for_block_one_warp_arrives.phase"));
}

/// Nothing to repair on a protocol whose laws hold; a repair is never invented.
#[test]
fn no_repair_for_a_correct_protocol() {
    let e = repair(&spec("specs/guide/double_buffer.phase"), &[]).unwrap_err();
    assert!(e.contains("already hold"), "{e}");
}
