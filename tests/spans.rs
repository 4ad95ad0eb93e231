//! Every step of a trace points at its own statement: a copy's landing at the line of the copy
//! that issued it (an A+B stage's B tile at the B copy), not the role's first copy.

use phasecheck_model::lang::diag::line_col;
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::spec::load;
use std::path::Path;

#[test]
fn each_landing_is_shown_at_the_line_of_its_own_copy() {
    let spec = load(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/specs/soundness/over_arrival_own_tx_fixed.phase"
        )),
        &[],
    )
    .unwrap();
    let line_of = |needle: &str| spec.source.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let (a_line, b_line) = (line_of("copy_async(tile[0]"), line_of("copy_async(tile[1]"));
    assert_ne!(a_line, b_line);
    let m = Model::new(spec.proto.clone());
    let mut s = m.init().next.unwrap();
    // The producer issues both copies (arrive_expect_tx, copy A, copy B).
    for _ in 0..3 {
        s = m.step(&s, Action::Thread(0)).next.unwrap();
    }
    assert_eq!(s.copies.len(), 2);
    // Land B first, then A: each landing names its own copy's line.
    let out = m.step(&s, Action::Land(1));
    let ev = out.event.unwrap();
    assert_eq!(line_col(&spec.source, ev.span.start as usize).0, b_line);
    let out = m.step(&out.next.unwrap(), Action::Land(0));
    assert_eq!(line_col(&spec.source, out.event.unwrap().span.start as usize).0, a_line);
}
