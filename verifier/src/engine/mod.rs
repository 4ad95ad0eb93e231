//! The explicit-state engine: the one search over the one transition system
//! (`phasecheck_model::ts`). Everything that explores executions goes through it: the checker and
//! the fix loop's restricted search through [`explore`], the GPU comparison's enumeration of
//! allowed outcomes through [`futures::fold`]; what they find is told by the callers.
//!
//! - `store`: exact, interned storage of visited states.
//! - `futures`: the observations of every execution from a state, folded depth-first with a memo
//!   (what a GPU run may show), for systems whose steps carry observations.
//! - `bfs`: breadth-first search, level by level, expansion in parallel, bookkeeping in order
//!   (so results do not depend on the thread count), with symmetry-canonical states and, where
//!   the model offers persistent subsets, partial-order reduction with the cycle proviso.
//! - `pool`: the search's worker threads, started once and woken for each parallel round.
//! - `segments`: the per-state arrays, grown in fixed segments that are never copied.

pub mod bfs;
pub mod futures;
pub mod pool;
pub mod segments;
pub mod store;

pub use bfs::{explore, Explored, Hit, Limits, Stop, Tally};
