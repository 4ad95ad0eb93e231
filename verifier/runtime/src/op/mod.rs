//! Each object's statements, executed on the runtime's objects: one module per hardware object,
//! as the model's semantics (model/src/rt/<object>.rs) and the CUDA generator
//! (gpu-conformance/src/codegen/<object>.rs) are laid out. A new statement of an object is one
//! arm in its module here.

mod copies;
mod mbarrier;
mod memory;
mod proxy;
mod warp;

pub(crate) use copies::directed as copy_directed;
pub(crate) use memory::directed as mem_directed;
