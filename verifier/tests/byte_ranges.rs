//! A copy or read with an `offset` and no `bytes` covers the rest of the buffer, whether the offset
//! is a constant (folded at lowering) or a value computed at run time: the transaction bytes it
//! completes are `size - offset`, so an `expect_tx` of exactly that holds and one of the whole
//! buffer does not.

use phasecheck_model::rt::Model;
use phasecheck_model::spec::load;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, CheckOptions, Verdict};
use std::collections::BTreeSet;

fn kinds_of(name: &str, expect_tx: u32, offset: &str) -> (Verdict, BTreeSet<ViolationKind>) {
    let src = format!(
        "protocol {name}\nbarrier full count 1\nbuffer tile bytes 256\nrole producer[1] {{\n  let o = 64\n  arrive_expect_tx(full, {expect_tx})\n  copy_async(tile, full, offset = {offset}, version = 1)\n}}\nrole consumer[1] {{\n  let o = 64\n  wait_parity(full, 0)\n  read(tile, offset = {offset}, expect = 1)\n}}\n"
    );
    let dir = std::env::temp_dir().join(format!("phasecheck-byte-ranges-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.phase"));
    std::fs::write(&path, src).unwrap();
    let spec = load(&path, &[]).unwrap();
    let r = check(&Model::new(spec.proto), &CheckOptions::default());
    (r.verdict, r.violations.iter().map(|v| v.kind).collect())
}

#[test]
fn an_offset_without_bytes_covers_the_rest_of_the_buffer() {
    for offset in ["64", "o"] {
        let (v, k) = kinds_of("rest", 192, offset);
        assert_eq!(v, Verdict::Holds, "offset = {offset}: {k:?}");
        // Counting the whole buffer, or the offset's bytes, leaves the phase short of its bytes.
        for wrong in [256, 64] {
            let (v, k) = kinds_of("short", wrong, offset);
            assert_eq!(v, Verdict::Violated, "offset = {offset}, expect_tx {wrong}");
            assert!(
                k.contains(&ViolationKind::Deadlock) || k.contains(&ViolationKind::OverArrival) || k.contains(&ViolationKind::TxRange),
                "{k:?}"
            );
        }
    }
}
