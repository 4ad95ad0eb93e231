//! NVRTC compilation of generated modules for sm_90a (through `sys`): the arch-specific target, since
//! the wgmma helpers issue `wgmma.mma_async`, which has no plain sm_90 form.

use crate::codegen::{module_source, Kernel};

pub const ARCH: &str = "sm_90a";

/// Include folders for `<cuda/barrier>`: `$PHASECHECK_CCCL_INCLUDE`, else the CUDA toolkit's.
pub fn include_paths() -> Vec<String> {
    let mut v = Vec::new();
    if let Ok(p) = std::env::var("PHASECHECK_CCCL_INCLUDE") {
        if !p.is_empty() {
            v.push(p);
        }
    }
    for p in ["/usr/local/cuda/include/cccl", "/usr/local/cuda/include"] {
        if std::path::Path::new(p).is_dir() {
            v.push(p.to_string());
        }
    }
    v
}

pub fn available() -> bool {
    crate::sys::nvrtc_present()
}

/// Compile CUDA source; Ok(PTX) or Err(log).
pub fn compile_source(src: &str, name: &str) -> Result<String, String> {
    crate::sys::compile_ptx(
        src,
        name,
        ARCH,
        &include_paths(),
        &["--std=c++17".to_string(), "-default-device".to_string()],
    )
}

/// Compile several kernels of one backend as one module.
pub fn compile_module(kernels: &[Kernel], name: &str) -> Result<String, String> {
    compile_source(&module_source(kernels), name)
}
