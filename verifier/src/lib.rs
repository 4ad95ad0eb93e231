//! The verifier: exhaustive search over the model (`search`, on the `engine`), readable traces
//! of what it found (`trace`: replay, trace files, minimizer, fix loop, rendering), and the
//! outcomes a GPU run of a spec may show (`outcomes`).

pub mod bounds;
pub mod engine;
pub mod explain;
pub mod outcomes;
pub mod search;
pub mod trace;

pub use search::{check, check_from, Bound, CheckOptions, Found, Internal, Progress, Report, Stats, Verdict};
pub use trace::{fixloop, minimize, render, tracefile};
pub mod api;
pub mod cause;
