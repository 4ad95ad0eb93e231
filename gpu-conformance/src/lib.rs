//! CUDA generation and GPU runs: every spec becomes a kernel (`codegen`), compiled with NVRTC
//! (`nvrtc`), run on the GPU (`runner`, through `sys`, which holds every raw cudarc call), and its
//! outcomes compared with those the model allows (`outcome`).

pub mod codegen;
pub mod fuzz;
pub mod nvrtc;
pub mod outcome;
pub mod runner;
pub mod sys;
