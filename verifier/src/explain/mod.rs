//! Report prose that needs more than one state: why a deadlock happened, told from the trace that
//! led to it. The model (`phasecheck_model::rt`) states facts; this module turns a path of facts
//! into advice, and only advice that is itself legal (it never suggests a drop that would take a
//! barrier's count to zero).

pub mod deadlock;

use crate::trace::Replayed;
use phasecheck_model::rt::{Model, Violation};
use phasecheck_model::ViolationKind;

/// The violations of the state a replayed trace ends in, each with its message told from the
/// trace (the model alone says only that every unfinished thread is blocked).
pub fn state_violations(model: &Model, r: &Replayed) -> Vec<Violation> {
    let Some(s) = r.last.as_ref() else { return Vec::new() };
    let mut en = Vec::new();
    model.actions(s, &mut en);
    let mut out = model.state_violations(s, &en);
    for v in out.iter_mut().filter(|v| v.kind == ViolationKind::Deadlock) {
        if let Some(m) = deadlock::explain(model, r) {
            v.message = m;
        }
    }
    out
}
