//! CUDA generation and GPU runs (issue 4).
pub mod outcome;
