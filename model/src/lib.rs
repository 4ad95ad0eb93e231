//! phasecheck's model: the `.phase` language (`lang`), its lowering to an executable program
//! (`program`), and the mbarrier semantics of SEMANTICS.md as a state machine (`rt`, one file
//! per hardware object).
//!
//! A new statement of the language touches, in order: `lang::ast` (its node), `lang::parser`
//! (its syntax), `lang::pretty` (printing it back), `lang::check` (names and arity),
//! `program::lower` (its instruction), one `rt/<object>.rs` (its semantics: the object whose
//! state it changes, called from the one dispatch in `rt/mod.rs`), and gpu-conformance's code
//! generators.

pub mod kind;
pub mod lang;

pub use kind::ViolationKind;
pub mod io;
pub mod program;
pub mod spec;

pub mod api;
pub mod rt;
#[cfg(feature = "proptest")]
pub mod strategies;
pub mod ts;
