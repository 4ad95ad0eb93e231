//! CUDA generation and GPU runs: every spec becomes a kernel (`codegen`), compiled with NVRTC
//! (`nvrtc`), run on the GPU in child processes (`child`, through `sys`, which holds every raw
//! cudarc call) as `runner` orchestrates (`plan`: the model stages within budgets), and its
//! outcomes judged against those the model allows (`compare`) into a report (`report`);
//! `rejudge` re-judges a committed report's observations. The outcome format, the allowed-outcome
//! enumeration and the replay schedules live in the verifier (`phasecheck_verifier::outcomes`).

pub mod child;
pub mod codegen;
pub mod compare;
pub mod fuzz;
pub mod nvrtc;
pub mod plan;
pub mod rejudge;
pub mod report;
pub mod runner;
pub mod sys;
