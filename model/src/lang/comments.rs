//! The comments of a `.phase` file, with their spans, for `phasecheck fmt`.
//!
//! The lexer drops comments (they never change a program), so the pretty-printer, which must
//! keep them, finds them here in a side table instead: this scan is independent of the token
//! stream and the parser, and the printer attaches each comment to the statement or declaration
//! it stands next to by comparing spans. The language has no string literals, so `//` and `/*`
//! start a comment wherever they appear outside one.

use super::ast::Span;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    pub span: Span,
    /// The comment exactly as written, `//` or `/* */` included (a line comment without its
    /// newline).
    pub text: String,
    /// Only whitespace precedes it on its line.
    pub own_line: bool,
    /// A blank line separates it from the code or comment before it.
    pub blank_before: bool,
}

/// Every comment of `source`, in order. An unterminated block comment runs to the end (the
/// lexer rejects such a file anyway).
pub fn comments(source: &str) -> Vec<Comment> {
    let b = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < b.len() {
        let end = match (b[i], b[i + 1]) {
            (b'/', b'/') => source[i..].find('\n').map(|k| i + k).unwrap_or(b.len()),
            (b'/', b'*') => source[i + 2..].find("*/").map(|k| i + 2 + k + 2).unwrap_or(b.len()),
            _ => {
                i += 1;
                continue;
            }
        };
        let before = &source[..i];
        let line_start = before.rfind('\n').map(|k| k + 1).unwrap_or(0);
        let own_line = before[line_start..].trim().is_empty();
        let gap = &before[before.trim_end().len()..];
        let blank_before = !before.trim().is_empty() && gap.matches('\n').count() >= 2;
        out.push(Comment {
            span: Span::new(i, end),
            text: source[i..end].trim_end_matches('\r').to_string(),
            own_line,
            blank_before,
        });
        i = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_block_and_nested_markers() {
        let src = "// head\n\n/* a // b */ x // t\n  y /* c\n d */\n";
        let c = comments(src);
        let texts: Vec<&str> = c.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, ["// head", "/* a // b */", "// t", "/* c\n d */"]);
        assert_eq!(c.iter().map(|c| c.own_line).collect::<Vec<_>>(), [true, true, false, false]);
        assert_eq!(c.iter().map(|c| c.blank_before).collect::<Vec<_>>(), [false, true, false, false]);
        assert_eq!(&src[c[2].span.start as usize..c[2].span.end as usize], "// t");
    }
}
