//! The protocol language of LANGUAGE.md: syntax tree, parser, static checks, pretty-printer.

pub mod ast;
pub mod blackwell;
pub mod check;
pub mod comments;
pub mod diag;
pub mod lexer;
pub mod parser;
pub mod pretty;
pub mod tokens;

pub use check::{check, check_all};
pub use diag::Diagnostic;
pub use parser::{parse, parse_all};
pub use pretty::{pretty, pretty_with_comments, same_program};
