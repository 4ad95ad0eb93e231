//! The verifier: exhaustive search over the model (`search`) and readable traces of what it found
//! (`trace`).

pub mod bounds;
pub mod search;
pub mod trace;

pub use search::{check, Bound, CheckOptions, Found, Progress, Report, Stats, Verdict};
pub mod minimize;
pub mod render;
pub mod tracefile;
