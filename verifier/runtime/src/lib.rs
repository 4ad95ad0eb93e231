//! phasecheck's reference runtime: the mbarrier / `cuda::barrier` semantics of SEMANTICS.md
//! implemented on atomics ([`barrier`]), an interpreter that runs lowered protocols on threads
//! over it ([`interp`]), and the comparison of its outcomes with the model's ([`cpu`]).
//!
//! It is a second, independent implementation of the semantics: built with `--cfg loom`, the same
//! code runs on loom's atomics and threads, and the loom models (`tests/loom_models.rs`) check
//! that the outcomes loom reaches on a protocol are exactly those the model allows. Where they
//! differ, one of the two is wrong.

pub mod barrier;
pub mod cpu;
mod engines;
pub mod interp;
mod op;
mod proxy;
mod quiet;
pub mod sched;
pub mod sync;

pub use barrier::{Barrier, Fault, Ub};
pub use interp::{run, Options, RunResult, Schedule, Unsupported};
