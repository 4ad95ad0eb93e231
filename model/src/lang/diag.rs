//! Diagnostics for bad input: one sentence, a code, and a caret under the offending text.
//!
//! Rendered by hand (rustc's layout) rather than through a library so that the text is stable for
//! snapshot tests and never depends on the terminal.

use super::ast::Span;
use std::fmt::Write as _;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// `E0xx`: stable, listed in docs/rules.md.
    pub code: &'static str,
    pub span: Span,
    /// One sentence: what is wrong and what would be right.
    pub message: String,
}

impl Diagnostic {
    pub fn new(code: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            span,
            message: message.into(),
        }
    }

    /// `file:line:col` (1-based, columns in characters) of the span start.
    pub fn position(&self, source: &str) -> (usize, usize) {
        line_col(source, self.span.start as usize)
    }

    /// The full report: header, location, the source line and a caret line.
    pub fn render(&self, file: &str, source: &str) -> String {
        let (line, col) = self.position(source);
        let text = source.lines().nth(line - 1).unwrap_or("");
        let width = line.to_string().len();
        let pad = " ".repeat(width);
        let start_byte = self.span.start as usize;
        let line_start = start_byte
            - source[..start_byte.min(source.len())]
                .chars()
                .rev()
                .take_while(|c| *c != '\n')
                .map(|c| c.len_utf8())
                .sum::<usize>();
        let line_end = line_start + text.len();
        let end = (self.span.end as usize).clamp(start_byte, line_end.max(start_byte));
        let carets = source.get(start_byte..end).map(|s| s.chars().count()).unwrap_or(1).max(1);
        let mut out = String::new();
        let _ = writeln!(out, "error[{}]: {}", self.code, self.message);
        let _ = writeln!(out, "{pad}--> {file}:{line}:{col}");
        let _ = writeln!(out, "{pad} |");
        let _ = writeln!(out, "{line} | {text}");
        let _ = writeln!(out, "{pad} | {}{}", " ".repeat(col - 1), "^".repeat(carets));
        out
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, col)
}
