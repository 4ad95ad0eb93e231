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

    /// The full report: header, location, the source line and a caret line. The source line is
    /// shown as a terminal would show it, made safe: tabs expand to 4 columns, wide characters
    /// take 2, control characters (escape sequences, CR, bidi overrides) are written `<U+XXXX>`,
    /// and a long line is cut to a window around the caret.
    pub fn render(&self, file: &str, source: &str) -> String {
        let (line, col) = self.position(source);
        let mut start_byte = (self.span.start as usize).min(source.len());
        while !source.is_char_boundary(start_byte) {
            start_byte -= 1;
        }
        let line_start = source[..start_byte].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line_end = source[line_start..].find('\n').map(|i| line_start + i).unwrap_or(source.len());
        let end = (self.span.end as usize).clamp(start_byte, line_end);
        // Display pieces of the line: (text, width, byte offset in the source).
        let mut pieces: Vec<(String, usize, usize)> = Vec::new();
        for (i, c) in source[line_start..line_end].char_indices() {
            let at = line_start + i;
            if c == '\u{feff}' && at == 0 {
                continue;
            }
            let (text, w) = match c {
                '\t' => ("    ".to_string(), 4),
                '\r' if at + 1 == line_end => (String::new(), 0),
                c if is_unsafe(c) => {
                    let t = format!("<U+{:04X}>", c as u32);
                    let w = t.len();
                    (t, w)
                }
                c => (c.to_string(), char_width(c)),
            };
            pieces.push((text, w, at));
        }
        let caret_col: usize = pieces.iter().take_while(|p| p.2 < start_byte).map(|p| p.1).sum();
        let caret_w: usize = pieces
            .iter()
            .filter(|p| p.2 >= start_byte && p.2 < end)
            .map(|p| p.1)
            .sum::<usize>()
            .clamp(1, SHOWN);
        // A window of the line around the caret.
        let total: usize = pieces.iter().map(|p| p.1).sum();
        let from = if total <= SHOWN { 0 } else { caret_col.saturating_sub(SHOWN / 3) };
        let mut shown = String::new();
        let mut col_in = 0usize;
        let mut pad = 0usize;
        let mut cut_right = false;
        for (t, w, _) in &pieces {
            if col_in < from {
                col_in += w;
                continue;
            }
            if col_in + w > from + SHOWN {
                cut_right = true;
                break;
            }
            if col_in < caret_col {
                pad += w;
            }
            shown.push_str(t);
            col_in += w;
        }
        let (lead, lead_w) = if from > 0 { ("...", 3) } else { ("", 0) };
        let tail = if cut_right { "..." } else { "" };
        let width = line.to_string().len();
        let gutter = " ".repeat(width);
        let mut out = String::new();
        let _ = writeln!(out, "error[{}]: {}", self.code, escape_controls(&self.message));
        let _ = writeln!(out, "{gutter}--> {}:{line}:{col}", escape_controls(file));
        let _ = writeln!(out, "{gutter} |");
        let _ = writeln!(out, "{line} | {lead}{shown}{tail}");
        let _ = writeln!(out, "{gutter} | {}{}", " ".repeat(lead_w + pad), "^".repeat(caret_w));
        out
    }
}

/// Display columns of the source line shown in a diagnostic.
const SHOWN: usize = 160;

/// Characters that must not reach a terminal as they are: C0/C1 controls, DEL, line and paragraph
/// separators, and the bidirectional overrides (text that displays in another order than it reads).
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Text with every unsafe character (see `is_unsafe`) written `<U+XXXX>`.
pub fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_unsafe(c) {
            let _ = write!(out, "<U+{:04X}>", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// Terminal columns of a character: 2 for East Asian wide and fullwidth forms and emoji, 0 for
/// combining marks and zero-width characters, 1 otherwise (an approximation of wcwidth).
fn char_width(c: char) -> usize {
    match c as u32 {
        0x0300..=0x036F | 0x200B..=0x200D | 0x20D0..=0x20FF | 0xFE00..=0xFE0F | 0xFE20..=0xFE2F => 0,
        0x1100..=0x115F
        | 0x2E80..=0x303E
        | 0x3041..=0x33FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF
        | 0xAC00..=0xD7A3
        | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F
        | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6
        | 0x1F300..=0x1F64F
        | 0x1F900..=0x1F9FF
        | 0x20000..=0x3FFFD => 2,
        _ => 1,
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    // A byte order mark is not a column.
    let col = before
        .rsplit('\n')
        .next()
        .unwrap_or("")
        .trim_start_matches('\u{feff}')
        .chars()
        .count()
        + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caret_under(src: &str, start: usize, end: usize) -> (String, String) {
        let r = Diagnostic::new("E001", Span::new(start, end), "m").render("f", src);
        let lines: Vec<&str> = r.lines().collect();
        (
            lines[3].split_once(" | ").unwrap().1.to_string(),
            lines[4].split_once(" | ").unwrap().1.to_string(),
        )
    }

    #[test]
    fn carets_line_up_under_tabs_and_wide_characters() {
        let src = "\t\u{5b57}\u{5b57} x = @";
        let at = src.find('@').unwrap();
        let (text, caret) = caret_under(src, at, at + 1);
        assert_eq!(caret.find('^'), Some(4 + 4 + 5), "{text:?}\n{caret:?}");
        assert_eq!(text, "    \u{5b57}\u{5b57} x = @");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let src = "\u{1b}[31mred\u{202e} @\r";
        let at = src.find('@').unwrap();
        let r = Diagnostic::new("E001", Span::new(at, at + 1), "bad \u{1b}[0m").render("f\u{1b}", src);
        assert!(!r.contains('\u{1b}') && !r.contains('\u{202e}') && !r.contains('\r'), "{r:?}");
        let (text, caret) = caret_under(src, at, at + 1);
        assert_eq!(caret.find('^'), text.find('@'));
    }

    #[test]
    fn a_long_line_is_cut_around_the_caret() {
        let src = format!("{}@{}", "a".repeat(1_000_000), "b".repeat(1000));
        let (text, caret) = caret_under(&src, 1_000_000, 1_000_001);
        assert!(text.len() <= SHOWN + 6, "{}", text.len());
        assert!(text.starts_with("...") && text.ends_with("..."));
        assert_eq!(caret.find('^'), text.find('@'));
    }

    #[test]
    fn a_span_inside_a_character_points_at_that_character() {
        // Lexer spans start on character boundaries; a hand-made one may not.
        let (text, caret) = caret_under("\u{e9}@", 1, 2);
        assert_eq!((text.as_str(), caret.find('^')), ("\u{e9}@", Some(0)));
    }

    #[test]
    fn a_byte_order_mark_is_not_a_column() {
        assert_eq!(line_col("\u{feff}ab", 4), (1, 2));
    }
}
