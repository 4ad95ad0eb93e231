//! phasecheck's model: the `.phase` language (`lang`), its lowering to an executable program
//! (`ir`, `lower`), and the mbarrier semantics of SEMANTICS.md as a state machine (`state`,
//! `step`).
//!
//! A new statement of the language touches, in order: `lang::ast` (its node), `lang::parser`
//! (its syntax), `lang::pretty` (printing it back), `lang::check` (names and arity), `lower` (its
//! instruction), `step` (its semantics), and gpu-conformance's code generators.

pub mod kind;
pub mod lang;

pub use kind::ViolationKind;
pub mod io;
pub mod ir;
pub mod lower;
pub mod selfcheck;
pub mod spec;
pub mod state;
pub mod step;
pub mod uniform;

pub mod api;
pub mod canon;
pub mod footprint;
pub mod path;
#[cfg(feature = "proptest")]
pub mod strategies;
pub mod ts;
