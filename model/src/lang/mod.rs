//! The protocol language of LANGUAGE.md: syntax tree, parser, static checks, pretty-printer.

pub mod ast;
pub mod diag;

pub use diag::Diagnostic;
