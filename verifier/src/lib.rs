//! The verifier: exhaustive search over the model (`search`) and readable traces of what it found
//! (`trace`).

pub mod bounds;
pub mod engine;
pub mod explain;
pub mod search;
pub mod trace;

pub use search::{check, check_from, Bound, CheckOptions, Found, Internal, Progress, Report, Stats, Verdict};
pub mod api;
pub mod cause;
pub mod fixloop;
pub mod minimize;
pub mod render;
pub mod tracefile;
