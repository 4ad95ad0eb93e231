//! The executable program: the syntax tree lowered (`lower`) to per-role instruction lists
//! (`ir`), the check that a role declared `uniform` is (`uniform`), and the one evaluator of the
//! language's integer expressions (`eval`), shared by lowering, constant folding and the step.
//!
//! A new statement of the language gets its instruction in `ir` and its lowering in `lower`;
//! its semantics go in one `rt/<object>.rs`.

mod blackwell;
mod code;
pub mod eval;
pub mod ir;
pub mod lower;
pub mod uniform;
