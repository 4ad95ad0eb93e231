//! Report prose that needs more than one state: why a deadlock happened, told from the trace that
//! led to it. The model (`phasecheck_model::step`) states facts; this module turns a path of facts
//! into advice, and only advice that is itself legal (it never suggests a drop that would take a
//! barrier's count to zero).

pub mod deadlock;
