//! Traces: the actions a search found, told as steps a reader can follow and files a user can
//! keep and replay.
//!
//! - `replay`: a path of actions replayed through the model into readable steps (who stepped,
//!   which statement, what it observed, which barrier fields changed), and the words for an
//!   action that does not replay. Every replay goes through the one cursor,
//!   `phasecheck_model::rt::path::Replay`, which checks that each action is enabled.
//! - [`tracefile`]: the trace file format (`counterexamples/*.trace.json`), written and verified.
//! - [`minimize`]: shortens a trace to fewer steps and context switches, same violation kind.
//! - [`fixloop`]: replays a recorded schedule against an edited spec ("does my edit fix it?").
//! - [`render`]: the text and HTML forms of a trace.

pub mod fixloop;
mod html;
pub mod minimize;
pub mod render;
mod replay;
pub mod tracefile;

pub use replay::{
    barrier_changes, copy_barrier, describe_obs, replay, thread_ref, why_not, BarrierChange, CopyRef, FieldChange, Names, ReplayError,
    Replayed, ThreadRef, TraceStep,
};
