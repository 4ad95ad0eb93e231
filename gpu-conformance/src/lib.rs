//! CUDA generation and GPU runs (issue 4).
