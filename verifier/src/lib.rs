//! Explicit-state search over the model.
