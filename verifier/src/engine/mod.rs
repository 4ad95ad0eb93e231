//! The explicit-state engine: the one search over the one transition system
//! (`phasecheck_model::ts`). Everything that explores executions (the checker, the fix loop's
//! restricted search) goes through [`explore`]; what it finds is told by the callers.
//!
//! - `store`: exact, interned storage of visited states.
//! - `bfs`: breadth-first search, level by level, expansion in parallel, bookkeeping in order
//!   (so results do not depend on the thread count), with symmetry-canonical states and, where
//!   the model offers persistent subsets, partial-order reduction with the cycle proviso.

pub mod bfs;
pub mod store;

pub use bfs::{explore, Explored, Hit, Limits, Stop, Tally};
