//! The outcome format lives in the verifier (`phasecheck_verifier::outcomes`), beside the
//! enumeration of allowed outcomes; the code generator records the statements it names through
//! these paths.

pub use phasecheck_verifier::outcomes::{completion_vars, recorded, Recorded};
